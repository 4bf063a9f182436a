"""Resources of the rank: host RSS, /dev/shm, torch's CUDA allocator and NVML, and the
CPU time and bytes its process used lately (:class:`UsageReader`).

Everything here runs on the sampler thread. With no GPU, or no NVML, the GPU figures are
absent and nothing is logged.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import deque
from typing import Any

import psutil
import torch

from distmon.wire import GpuStatus, Memory, Usage

_PAGE = os.sysconf("SC_PAGE_SIZE")
_SHM = "/dev/shm"

_THROTTLE_REASONS = {
    0x2: "app_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "power_brake",
}


USAGE_WINDOW = 10.0
"""Seconds over which the process's CPU time and bytes moved are reported: the same window
the monitor's prober judges progress over."""


def process_totals() -> tuple[float, int, int]:
    """CPU seconds (every thread's), and bytes read and written through system calls
    (``rchar``, ``wchar``), since the process started."""
    times = os.times()
    read = written = 0
    with contextlib.suppress(OSError, ValueError), open("/proc/self/io", "rb") as f:
        fields = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
        read, written = int(fields[b"rchar"]), int(fields[b"wchar"])
    return times.user + times.system, read, written


class UsageReader:
    """What the process did over the last :data:`USAGE_WINDOW` seconds, from its running
    totals sampled once a report: so a rank whose peers wait for it says whether it works."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, tuple[float, int, int]]] = deque()

    def read(self) -> Usage:
        now = time.monotonic()
        totals = process_totals()
        self._samples.append((now, totals))
        while len(self._samples) > 2 and now - self._samples[1][0] >= USAGE_WINDOW:
            self._samples.popleft()
        then, (cpu, read, written) = self._samples[0]
        return Usage(seconds=now - then, cpu=totals[0] - cpu, read=totals[1] - read, written=totals[2] - written)


def host_memory() -> Memory:
    with open("/proc/self/statm", "rb") as f:
        rss = int(f.read().split()[1]) * _PAGE
    vm = psutil.virtual_memory()
    memory = Memory(rss=rss, host_total=vm.total, host_available=vm.available)
    with contextlib.suppress(OSError):
        st = os.statvfs(_SHM)
        memory.shm_total = st.f_blocks * st.f_frsize
        memory.shm_free = st.f_bavail * st.f_frsize
    return memory


class GpuReader:
    """The rank's GPU, read through torch's allocator statistics and NVML."""

    def __init__(self) -> None:
        self._nvml: Any = None
        self._handle: Any = None
        self._events: Any = None
        self._xid: int | None = None
        self._tried_nvml = False

    def read(self) -> GpuStatus | None:
        if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
            return None
        index = _device_index()
        stats = torch.cuda.memory_stats(index)
        gpu = GpuStatus(
            index=index,
            allocated=stats.get("allocated_bytes.all.current"),
            reserved=stats.get("reserved_bytes.all.current"),
            peak=stats.get("allocated_bytes.all.peak"),
        )
        self._read_nvml(index, gpu)
        return gpu

    def _read_nvml(self, index: int, gpu: GpuStatus) -> None:
        if not self._tried_nvml:
            self._tried_nvml = True
            self._open_nvml(index)
        nvml, handle = self._nvml, self._handle
        if handle is None:
            return
        with contextlib.suppress(Exception):
            info = nvml.nvmlDeviceGetMemoryInfo(handle)
            gpu.used, gpu.total = int(info.used), int(info.total)
        with contextlib.suppress(Exception):
            gpu.util = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        with contextlib.suppress(Exception):
            gpu.temp = float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))
        with contextlib.suppress(Exception):
            gpu.power = nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
        with contextlib.suppress(Exception):
            mask = nvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
            gpu.throttle = [name for bit, name in _THROTTLE_REASONS.items() if mask & bit]
        with contextlib.suppress(Exception):
            gpu.ecc = int(
                nvml.nvmlDeviceGetTotalEccErrors(
                    handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
                )
            )
        if self._events is not None:
            with contextlib.suppress(Exception):
                event = nvml.nvmlEventSetWait_v2(self._events, 0)
                self._xid = int(event.eventData)
        gpu.xid = self._xid

    def _open_nvml(self, index: int) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            nvml_index = torch.cuda._get_nvml_device_index(index)
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(nvml_index)
            self._nvml = pynvml
        except Exception:
            return
        with contextlib.suppress(Exception):
            events = pynvml.nvmlEventSetCreate()
            pynvml.nvmlDeviceRegisterEvents(self._handle, pynvml.nvmlEventTypeXidCriticalError, events)
            self._events = events


def _device_index() -> int:
    """The training thread's device: CUDA's current device is per thread, so the sampler
    thread cannot ask for it; torchrun's convention is one device per local rank."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    return local_rank % max(int(torch.cuda.device_count()), 1)
