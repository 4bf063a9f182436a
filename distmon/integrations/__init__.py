"""Ready-made callbacks for training frameworks, importable from the installed package:

    from distmon.integrations.lightning import DistmonCallback      # PyTorch Lightning
    from distmon.integrations.transformers import DistmonCallback   # Hugging Face Trainer

Rank side: each imports its framework and :mod:`distmon.hooks`, never the watch side.
"""
