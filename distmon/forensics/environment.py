"""What the job's environment refused it, in the words of whatever met the refusal: a host name
that did not resolve, GPUs that cannot reach each other's memory, a library missing or built for
another version, a CUDA call of NCCL's that the build, the driver or the GPU do not support, ranks
holding different models (or one whose parameters never reached the others) as DDP is built, ranks running
the model's modules in different orders under ZeRO-3, a GPU
the installed torch was not built for, MPI that could not start or a launch asking more slots than
its hosts have, arguments the script does not take, a rank outside the world size, gloo or the
InfiniBand verbs refusing to set up, a launcher that could not reach every node or lost one, a
cluster that could not start the workers in time, a node declared dead, taken back or evicting its
pod, a scheduler's time limit, no GPU to be seen, a feature the GPU, driver or toolkit lacks, Slurm
refusing the tasks, the training's numbers diverging (shared by every rank through its gradients)::

    ValueError: host not found: Name or service not known              (c10d's TCPStore, torch 1.x)
    ssh: Could not resolve hostname job-worker-5.job: Name or service not known
    ssh: connect to host node2 port 22: Connection refused          (pdsh's or the launcher's ssh)
    node2: user@node2: Permission denied (publickey,password).         (pdsh's ssh, no key to log in with)
    ... --node_rank=%n --master_addr= --master_port=29500 train.py   (an address that came out empty)
    RuntimeError: Using hostfile at /job/hostfile but host=worker-1 was not reachable via ssh.
                                                        (DeepSpeed's launcher, before any rank starts)
    Error: failed to run torchrun ... on n2, is localhost: False, exception: Authentication failed.
                                                        (ColossalAI's launcher, over ssh)
    train.py: error: unrecognized arguments: --local_rank=1     (the script's parser, in every process)
    usage: train.py [-h] [--lr LR] ...                  (argparse's usage, before its error: it refused)
    n1:25:25 [0] init.cc:981 NCCL WARN Invalid rank requested : 2/2
    ORTE was unable to reliably start one or more daemons.
    Cuda failure 217 'peer access is not supported between these two devices'      (NCCL's P2P)
    RuntimeError: DDP expects same model across all ranks, but Rank 2 has 363 params, while rank 0 has
        inconsistent 0 params.                          (DDP's check as it is built: the counts never came)
    RuntimeError: disagreement between rank0 and rank6: rank0: [-4829058278667240489, ...], rank6: [...]
                                                        (DeepSpeed ZeRO-3's check of the modules' order)
    ImportError: libmpi.so.40: cannot open shared object file: No such file or directory
    n1:42:42 [0] init.cc:416 NCCL WARN Cuda failure 'operation not supported'     (NCCL, 2.12+)
    UserWarning: NVIDIA H100 with CUDA capability sm_90 is not compatible with the current PyTorch
        installation.                                   (torch.cuda's check, and its source line)
    The worker group startup timed out after 30.0 seconds waiting for 8 workers.    (Ray Train)
    The node with node id: ... and ip: 10.0.0.3 has been marked dead because the detector has
        missed too many heartbeats from it.                                         (Ray's GCS)
    =>> PBS: job killed: walltime 86431 exceeded limit 86400
    NCCL WARN NET/IB : collective mismatch error local size 546816 remote 524288
    srun: error: Munge encode failed: Failed to access "/var/run/munge/munge.socket.2"
    Exception: Current loss scale already at minimum - cannot decrease scale anymore.   (DeepSpeed)
    WARNING [train.py:1057] (2/4) Grad scale is small: 1.2924697071141057e-26     (icefall, k2's recipes)
    RuntimeError: grad_scale is too small, exiting: 2.3283064365386963e-10
    FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding.  (fairseq)
    RuntimeError: use_libuv was requested but PyTorch was build without libuv support  (torch 2.4+ on Windows)
    RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, ...

Each is the set-up's or the platform's, the same for whichever process met it first: no rank is
to blame for it, and the verdict says what to check; a rank's NCCL error after NCCL's refusal is
that refusal said again. Each kind is one entry of :data:`FAULTS`: its words are data, read
anywhere in a line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from distmon.guards.text import visible

MAX_FAULTS = 16
"""Faults kept from one log."""


@dataclass(frozen=True)
class Fault:
    """One kind of refusal: what failed, what to check, the words that say it and a literal each
    line saying it holds (a cheap test before the pattern)."""

    what: str
    check: str
    keys: tuple[str, ...]
    pattern: re.Pattern[str]
    nccl: bool = False
    """NCCL says it: a rank's NCCL error (``unhandled cuda error``) is the same refusal, said again."""
    warning: bool = False
    """A warning says it (torch's check of the GPU's capability warns, the failure comes later)."""
    exits: int | None = None
    """The exit code a process ends with once it has said it: a worker that ended otherwise failed
    of something else."""
    fallback: bool = False
    """It is said only where the log says no other refusal (argparse's usage, before its error line)."""
    setup: bool = False
    """It keeps the job from starting: where the log shows the ranks ran collectives, it did not."""
    shared: bool = False
    """Every rank meets it alike (the numbers the ranks share): not where the log shows ranks waiting, gone past
    the check that raised it (Megatron's NaN check comes before the ranks share their gradients)."""


_REFUSED = (
    "named symbol not found|no kernel image is available for execution on the device|invalid device function"
    "|device kernel image is invalid|operation not supported|invalid argument|invalid resource handle"
    "|system not yet initialized|the provided PTX was compiled with an unsupported toolchain|unsupported PTX version"
    "|forward compatibility was attempted on non supported HW|system has unsupported display driver"
)
"""CUDA's words (``cudaGetErrorString``) for a call the build, the driver or the GPU do not support: code
missing for the GPU's architecture, a driver too old for the build or a feature the node lacks (a memory
pool, NVLS's multicast, the Fabric Manager not started), a stream or event the version pairing mishandles.
The same in every process of the set-up; not memory run out, nor an illegal access (a kernel's own)."""

ARGUMENTS = (
    "the script's argument parser against what the launcher passes: torch.distributed.launch passes --local_rank "
    "(--local-rank since torch 2.0), torchrun passes none (read LOCAL_RANK); the command line itself (a command "
    "pasted twice, a variable that came out empty)"
)
"""What to check where an argument parser refused its command line."""

FAULTS = (
    Fault(
        "a host name did not resolve",
        "the host names the launch uses (MASTER_ADDR, the hostfile, the rendezvous endpoint) and whether each is "
        "registered yet (a pod's or a node's DNS name comes up with it: start the workers once it has, or retry)",
        ("not known", "resolve", "name resolution", "servname", "host not found", "getaddrinfo"),
        re.compile(
            r"Name or service not known|Could not resolve hostname|Temporary failure in name resolution"
            r"|nodename nor servname provided|host not found|getaddrinfo(?: failed|\(\) failed)"
        ),
    ),
    Fault(
        "the GPUs cannot reach each other's memory (peer-to-peer)",
        "peer-to-peer between the GPUs (`nvidia-smi topo -p2p r`), PCIe ACS and the IOMMU (ACS off, iommu=pt or "
        "intel_iommu=off), the driver; NCCL_P2P_DISABLE=1 as a test",
        ("peer access", "217", "PeerAccess"),
        re.compile(r"peer access is not supported|cudaErrorPeerAccessUnsupported|Cuda failure 217\b"),
        nccl=True,
    ),
    Fault(
        "DDP's check that every rank holds the same model brought back no parameters from a rank (no model has none)",
        "the transport that carried the check's counts between the ranks (NCCL_P2P_DISABLE=1 and NCCL_IB_DISABLE=1 "
        "as a test, peer-to-peer between the GPUs, the network interface NCCL picks), or a model built on some "
        "ranks only",
        ("inconsistent 0 params",),
        re.compile(r"but Rank \d{1,9} has \d{1,12} params, while rank \d{1,9} has inconsistent 0 params"),
        setup=True,
    ),
    Fault(
        "the ranks built different models (DDP's check that every rank holds the same one)",
        "how each rank builds the model: a configuration, checkpoint or code that differs between the nodes or "
        "ranks (a branch on the rank, a file read per node, another version installed on a node)",
        ("has inconsistent", "appears not to match sizes"),
        re.compile(
            r"but Rank \d{1,9} has \d{1,12} params, while rank \d{1,9} has inconsistent [1-9]\d{0,11} params"
            r"|in this process with sizes \[[\d, ]{0,200}\] appears not to match sizes of the same param in process"
        ),
        setup=True,
    ),
    Fault(
        "DeepSpeed ZeRO-3 found the ranks running the model's modules in different orders (its check of each "
        "rank's order against rank 0's)",
        "a model that runs differently on each rank (mixture-of-experts routing, a branch on the data or on the rank, "
        "generation to different lengths): under ZeRO-3 every rank runs the same modules in the same order "
        "(or use ZeRO stage 2)",
        ("disagreement between rank0",),
        re.compile(r"disagreement between rank0 and rank\d{1,9}: rank0: \["),
        shared=True,
    ),
    Fault(
        "a library is missing or was built for another version",
        "the installation: the versions of torch, CUDA, NCCL and MPI and of what was built against them (Horovod, "
        "an extension), LD_LIBRARY_PATH, the driver",
        ("shared object", "undefined symbol", "GLIBC", "driver version", "kernel image", "No module named"),
        re.compile(
            r"cannot open shared object file|undefined symbol: |version `GLIBC\w{0,4}_[\d.]{1,12}' not found"
            r"|ModuleNotFoundError: No module named"
            r"|CUDA driver version is insufficient for CUDA runtime version"
            r"|no kernel image is available for execution on the device"
        ),
    ),
    Fault(
        "NCCL's CUDA call failed on what the build, the driver or the GPU lacks",
        "the build against the GPU and the driver: torch's CUDA build and the NCCL in it (torch.cuda.get_arch_list() "
        "holding the GPU's sm_XX, a newer NCCL), the driver (nvidia-smi) against them, the device each process sets "
        "before its first collective (torch.cuda.set_device)",
        ("Cuda failure",),
        re.compile(rf"Cuda failure (?:\d{{1,4}} )?'(?:{_REFUSED})"),
        nccl=True,
    ),
    Fault(
        "the GPU is not one the installed torch was built for",
        "the torch build against the GPU: torch.cuda.get_arch_list() against the GPU's capability (a build for a "
        "newer CUDA that has the GPU's sm_XX, or an older torch for an old GPU)",
        ("not compatible with the current PyTorch", "incompatible_device_warn", "no longer supports this GPU"),
        re.compile(
            r"with CUDA capability sm_\d{1,4} is not compatible with the current PyTorch installation"
            r"|warnings\.warn\(incompatible_device_warn\.format\("
            r"|PyTorch no longer supports this GPU because it is too old"
        ),
        warning=True,
    ),
    Fault(
        "the launcher could not reach every node to start its processes",
        "passwordless ssh from the launching node to each node (`ssh -o PasswordAuthentication=no HOST hostname`), "
        "the nodes' names in the hostfile, the launcher and its libraries on each node's PATH and LD_LIBRARY_PATH",
        (
            "reliably start",
            "Host key verification",
            "reachable via ssh",
            "is localhost:",
            "ssh: connect to host",
            "Permission denied (",
            "PasswordAuthentication=no",
        ),
        re.compile(
            r"(?:ORTE|PRTE) was unable to reliably start one or more daemons|Host key verification failed"
            r"|ssh: connect to host \S{1,253} port \d{1,5}: (?:Connection refused|No route to host"
            r"|Connection timed out|Network is unreachable)"
            r"|(?<![\w.-])(?!git@)[\w.-]{1,64}@[\w.-]{1,253}: Permission denied "
            r"\((?:publickey|password|gssapi|keyboard-interactive|hostbased)[\w,-]{0,80}\)"
            r"|Command 'ssh -o PasswordAuthentication=no (?:-p ?\d{1,5} )?\S{1,253} hostname' returned non-zero exit "
            r"status 255"
            r"|host=\S{1,253} was not reachable via ssh"
            r"|is localhost: (?:True|False), exception: (?:No authentication methods available"
            r"|Authentication failed|not a valid \w{1,10} private key file|Unable to connect to port \d{1,5}"
            r"|Error reading SSH protocol banner)"
        ),
        setup=True,
    ),
    Fault(
        "the launch was given no master address (the variable it takes the address from came out empty)",
        "where the launch takes the master's address from (MASTER_ADDR, --master_addr, the hostfile's first host, "
        "`hostname -i` in a container whose name has no address yet) on the node that launches",
        ("--master_addr", "Using IP address of  for node", "rendezvous endpoint ':"),
        re.compile(
            r"--master_addr(?:=(?:\s|$|;)| ?=?(?:''|\"\")(?:\s|$))|Using IP address of  for node"
            r"|The hostname of the rendezvous endpoint ':\d{1,5}' "
        ),
        setup=True,
    ),
    Fault(
        "the script's argument parser refused the command line the launcher gave it",
        ARGUMENTS,
        ("error: unrecognized arguments", "error: the following arguments"),
        re.compile(r": error: (?:unrecognized arguments: |the following arguments are required: )"),
        exits=2,
    ),
    Fault(
        "an argument parser printed its usage: it refused the command line it was given (the script's, or the "
        "launcher's own; its error line is not in the log)",
        ARGUMENTS,
        ("usage: ",),
        re.compile(r"^usage: [\w.-]{1,200}\.py \[-h\]"),
        exits=2,
        fallback=True,
    ),
    Fault(
        "the launch gave a process a rank outside the world size",
        "each process's RANK and WORLD_SIZE (node rank times processes per node, plus the local rank, below "
        "nodes times processes per node), as the launcher and the cluster's operator set them",
        ("Invalid rank requested",),
        re.compile(r"NCCL WARN Invalid rank requested : \d{1,9}/\d{1,9}"),
        nccl=True,
    ),
    Fault(
        "the GPU, its driver or the CUDA toolkit lacks a feature the program asked for",
        "what the feature needs against the node (the driver's and the toolkit's versions, the GPU's model, its "
        "NVLink or NVSwitch for multicast), or the feature turned off as the message says",
        ("not support",),
        re.compile(r"\b(?:[Dd]evice|[Dd]river|[Tt]oolkit)(?: version)?s?\b[\w ,/]{0,60}? (?:does|do) not support\b"),
    ),
    Fault(
        "the InfiniBand transport between the nodes delivered a message of a size the receiver did not post",
        "NCCL's version and environment alike on every node (NCCL_PROTO, NCCL_ALGO, NCCL_IB_*), the adapters' "
        "firmware and relaxed ordering; NCCL_IB_DISABLE=1 as a test; where all are alike, ranks calling one "
        "collective with different sizes (TORCH_DISTRIBUTED_DEBUG=DETAIL)",
        ("collective mismatch",),
        re.compile(r"NCCL WARN NET/IB ?: .{0,200}collective mismatch error"),
        nccl=True,
    ),
    Fault(
        "Slurm refused to start the job's tasks",
        "the cluster's Slurm on this host: munged running (`systemctl status munge`, its socket), the partition, "
        "account and resources asked (srun's error says which)",
        ("srun: error:",),
        re.compile(
            r"srun: error: (?:Munge (?:encode|decode) failed|.{0,120}authentication error"
            r"|Unable to allocate resources: )"
        ),
    ),
    Fault(
        "the training's numbers diverged (a loss or gradient not finite), alike in every rank: the ranks share "
        "their gradients",
        "the learning rate and its warm-up, fp16 against bf16 (a loss scale at its minimum), gradient clipping, the "
        "data (a bad sample: run the step on one rank with anomaly detection)",
        (
            "loss scale already at minimum",
            "found NaN in local grad norm",
            "grad_scale is too small",
            "Grad scale is small",
            "Minimum loss scale",
        ),
        re.compile(
            r"Current loss scale already at minimum - cannot decrease scale anymore"
            r"|found NaN in local grad norm in backwards? pass|grad_scale is too small, exiting"
            r"|Grad scale is small: [\d.]{1,20}e-\d{1,3}|Minimum loss scale reached \([\d.e-]{1,20}\)"
        ),
        shared=True,
    ),
    Fault(
        "the launch asked for more processes than its hosts have slots",
        "the process count (-np) against the hostfile's slots (--oversubscribe, or more hosts)",
        ("not enough slots",),
        re.compile(r"There are not enough slots available in the system to satisfy"),
    ),
    Fault(
        "MPI could not start",
        "the MPI installation and its transports on each node (UCX_TLS, OMPI_MCA_btl, the fabric's drivers), "
        "the launcher's environment",
        ("MPI_INIT failed", "PMPI_Init", "requested component was not found"),
        re.compile(
            r"It looks like MPI_INIT failed for some reason|Fatal error in PMPI_Init"
            r"|A requested component was not found, or was unable to be opened"
        ),
    ),
    Fault(
        "gloo could not connect the processes as they set up",
        "the address each host's name resolves to (/etc/hosts mapping it to 127.0.1.1), GLOO_SOCKET_IFNAME, "
        "a firewall between the hosts",
        ("connectFullMesh",),
        re.compile(r"connectFullMesh failed"),
    ),
    Fault(
        "the InfiniBand verbs refused the transport's set-up",
        "the locked-memory limit (ulimit -l, unlimited in the container), GPUDirect RDMA's module "
        "(nvidia_peermem), the adapter (`ibstat`)",
        ("ibv_",),
        re.compile(r"Call to ibv_(?:reg_mr|reg_dmabuf_mr|create_\w{1,10}|modify_qp|alloc_pd)\w{0,20} failed"),
    ),
    Fault(
        "the launcher lost a node's daemon",
        "that node (its network, a reboot, the scheduler taking it back: its own logs)",
        ("lost communication with a remote daemon",),
        re.compile(r"(?:ORTE|PRTE) has lost communication with a remote daemon"),
    ),
    Fault(
        "the cluster did not start the workers in time",
        "the cluster's free resources (GPUs, autoscaling), the placement asked (ScalingConfig), the runtime "
        "environment's install time (RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S)",
        ("startup timed out",),
        re.compile(r"worker group startup timed out after [\d.]{1,12} seconds"),
    ),
    Fault(
        "a node was declared dead",
        "that node: shut down, preempted or out of memory, or its agent crashed (its own logs, the cloud's events)",
        ("marked dead", "node has died", "node died"),
        re.compile(
            r"has been marked dead because the detector has missed too many heartbeats"
            r"|(?:actor|task|worker) (?:is dead|died|failed) because its node (?:has )?died"
        ),
    ),
    Fault(
        "a node was taken back",
        "the node's preemption (a spot or preemptible instance, the scheduler's priorities): checkpoint and resume",
        ("preempted", "interruption"),
        re.compile(r"(?:[Ii]nstance|VM|[Nn]ode)\b.{0,120}\b(?:was|has been) preempted|[Ss]pot instance interruption"),
    ),
    Fault(
        "the node ran low on a resource and evicted the pod",
        "the node's memory or disk against the pods' requests and limits (kubectl describe node)",
        ("low on resource",),
        re.compile(r"The node was low on resource: \w{1,40}"),
    ),
    Fault(
        "the scheduler's time limit ran out",
        "the time the job asked (walltime, --time, activeDeadlineSeconds), or checkpoint and resume",
        ("walltime", "TERM_RUNLIMIT", "deadline"),
        re.compile(
            r"job killed: walltime \d{1,12} exceeded limit \d{1,12}|TERM_RUNLIMIT"
            r"|Job was active longer than specified deadline"
        ),
    ),
    Fault(
        "c10d's store was asked to use libuv, which this torch build lacks (torch's Windows wheels)",
        "USE_LIBUV=0 in the environment (use_libuv=0 in an init_method URL), or a torch build with libuv",
        ("use_libuv",),
        re.compile(r"use_libuv was requested but PyTorch was build without libuv support"),
    ),
    Fault(
        "CUDA was initialized in the process that forked the workers, which every forked worker then refuses",
        "what touches CUDA before the fork (a notebook cell, an import that queries the GPU), or start the workers "
        "with the 'spawn' start method",
        ("re-initialize CUDA",),
        re.compile(r"Cannot re-initialize CUDA in forked subprocess"),
    ),
    Fault(
        "no GPU could be used",
        "the devices the launch gives each process (CUDA_VISIBLE_DEVICES, --gres, the container's GPUs), the driver, "
        "a GPU in exclusive mode held by another process",
        ("CUDA-capable", "NVIDIA driver"),
        re.compile(
            r"no CUDA-capable device is detected|CUDA-capable device\(s\) is/are busy or unavailable"
            r"|Found no NVIDIA driver on your system|couldn't communicate with the NVIDIA driver"
        ),
    ),
)
"""The refusals read, each as data."""
_WARNING = re.compile(r"\b\w{0,40}Warning\b|\[W\d{3,4} ")
"""A Python warning (an optional extension not loaded) or torch's glog warning: routine, no refusal."""
_KEYS = re.compile("|".join(re.escape(key) for fault in FAULTS for key in fault.keys))


@dataclass(frozen=True)
class Met:
    """A refusal a line of the log says, in its words."""

    fault: Fault
    said: str


@dataclass
class Environment:
    """The refusals the log's lines say, in the order it says them."""

    met: list[Met] = field(default_factory=list)

    def line(self, body: str) -> bool:
        """Reads ``body`` if it says one of :data:`FAULTS`."""
        if len(self.met) >= MAX_FAULTS or _KEYS.search(body) is None:
            return False
        warned = _WARNING.search(body) is not None
        for fault in FAULTS:
            keyed = any(key in body for key in fault.keys) and (fault.warning or not warned)
            found = fault.pattern.search(body) if keyed else None
            if found is not None:
                said = visible(body.strip(), 200)
                if all(m.fault is not fault for m in self.met):
                    self.met.append(Met(fault, said))
                return True
        return False

    @property
    def by_nccl(self) -> bool:
        """NCCL said a refusal: the ranks' NCCL errors are that refusal, not failures of their own."""
        return any(m.fault.nccl for m in self.met)

    @property
    def exits(self) -> set[int]:
        """The exit codes the refusals said end their processes with."""
        return {m.fault.exits for m in self.met if m.fault.exits is not None}

    def said(self, ran: bool = False, waited: bool = False) -> str | None:
        """The first refusal, in words: what, the line, what to check; where the ranks ``ran``
        collectives, none that would have kept the job from starting; where ranks ``waited``, none every rank
        meets alike."""
        met = [m for m in self.met if not (ran and m.fault.setup) and not (waited and m.fault.shared)]
        if not met:
            return None
        first = next((m for m in met if not m.fault.fallback), met[0])
        return f"{first.fault.what} ({first.said}): the set-up or the platform, not a rank: check {first.fault.check}"


def refused(text: str) -> bool:
    """``text`` (an exception's message) says one of :data:`FAULTS`: the set-up's words, no fault of the
    process that raised it."""
    return _KEYS.search(text) is not None and any(fault.pattern.search(text) for fault in FAULTS)
