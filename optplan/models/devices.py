"""GPUs as devices: a node's cards one by one, and a pod's share of a card.

A snapshot without device information (no node names its devices) keeps the whole-card model: a pod
asks for ``nvidia.com/gpu`` cards and any free card will do. With device information, a node's GPUs are
``GpuDevice`` s (index, model, memory) and a pod either asks for k whole cards (``nvidia.com/gpu: k``,
on any k cards no share touches) or holds a ``GpuShare``: ``count`` devices, on each a share of compute
(milli-GPU, 0..1000) and of memory (MiB), each pinned to one device of its node.

Where the numbers come from (``adapters.vgpu`` reads them): Volcano's device-share plugin, the HAMi
model (resources ``volcano.sh/vgpu-number``, ``volcano.sh/vgpu-cores`` in percent of a card,
``volcano.sh/vgpu-memory`` in MiB, ``volcano.sh/vgpu-memory-percentage``; the node's devices in the
annotation ``volcano.sh/node-vgpu-register``, a running pod's devices in ``volcano.sh/vgpu-ids-new``), and
the older gpushare model (``volcano.sh/gpu-memory`` per pod, pinned by ``volcano.sh/gpu-index``; a node's
cards are ``volcano.sh/gpu-number`` of equal memory). HAMi's own scheduler uses the same model under other
names (``nvidia.com/gpumem``, ``nvidia.com/gpucores``, ``nvidia.com/gpumem-percentage`` next to the count
``nvidia.com/gpu``; the node's devices in ``hami.io/node-nvidia-register``, a pod's in
``hami.io/vgpu-devices-allocated``). Amounts here are plain integers, not milli-units.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

MILLI_PER_GPU = 1000
"""One whole GPU in milli-GPU (the openb trace's ``gpu_milli`` unit)."""
WHOLE_GPU = "nvidia.com/gpu"
"""The whole-card resource of NVIDIA's device plugin."""

VGPU_NUMBER = "volcano.sh/vgpu-number"
VGPU_CORES = "volcano.sh/vgpu-cores"
VGPU_MEMORY = "volcano.sh/vgpu-memory"
VGPU_MEMORY_PERCENTAGE = "volcano.sh/vgpu-memory-percentage"
VGPU_RESOURCES = (VGPU_NUMBER, VGPU_CORES, VGPU_MEMORY, VGPU_MEMORY_PERCENTAGE)
VGPU_REGISTER = "volcano.sh/node-vgpu-register"
"""Node annotation: ``UUID,count,memoryMiB,type,health,mode`` per device, devices separated by ``:``."""
VGPU_IDS = "volcano.sh/vgpu-ids-new"
"""Pod annotation: per container (``;``) the devices (``:``) as ``UUID,type,usedMemoryMiB,usedCores``."""
VGPU_NODE = "volcano.sh/vgpu-node"
"""Pod annotation: the node the plugin allocated the devices of ``VGPU_IDS`` on."""
VGPU_USE_UUID = "volcano.sh/vgpu-use-gpuuuid"
"""Pod annotation (Volcano v1.16 on; v1.15 ignores it): the device UUIDs the vGPU plugin may choose."""
VGPU_PODGROUP_POLICY = "volcano.sh/vgpu-podgroup-policy"
"""Pod annotation: ``spread`` puts the pods of one PodGroup on distinct vGPU devices (Volcano v1.15)."""
VGPU_MODE = "volcano.sh/vgpu-mode"
"""Pod annotation: the sharing mode (``hami-core``, ``mig``) the node's vGPU devices must be in."""
GPU_USE_TYPE = "nvidia.com/use-gputype"
GPU_NOUSE_TYPE = "nvidia.com/nouse-gputype"
GPUSHARE_MEMORY = "volcano.sh/gpu-memory"
GPUSHARE_NUMBER = "volcano.sh/gpu-number"
GPUSHARE_INDEX = "volcano.sh/gpu-index"
"""Pod annotation of the gpushare plugin: the device indices, comma-separated."""
HAMI_MEMORY = "nvidia.com/gpumem"
HAMI_CORES = "nvidia.com/gpucores"
HAMI_MEMORY_PERCENTAGE = "nvidia.com/gpumem-percentage"
HAMI_RESOURCES = (HAMI_MEMORY, HAMI_CORES, HAMI_MEMORY_PERCENTAGE)
"""HAMi's share resources (its chart's defaults); the count is ``nvidia.com/gpu``, in vGPU slots."""
HAMI_REGISTER = "hami.io/node-nvidia-register"
"""Node annotation of HAMi's device plugin: a JSON list of ``{id, count, devmem, devcore, type, numa, health,
index, mode}`` (older releases: ``id,count,devmem,devcore,type,numa,health[,index,mode]`` per device, ``:``)."""
HAMI_ALLOCATED = "hami.io/vgpu-devices-allocated"
HAMI_TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
"""Pod annotations of HAMi's scheduler, both in ``VGPU_IDS``' format: the devices it chose (``to-allocate``
is drained by the device plugin as containers start; ``allocated`` keeps them)."""
HAMI_USE_UUID = "nvidia.com/use-gpuuuid"
"""Pod annotation HAMi's scheduler honours: the device UUIDs it may choose (comma-separated)."""
SHARE_MILLI = "optplan.io/gpu-milli"
"""Pod annotation optplan writes (``import openb --shared``): the exact milli-GPU of a share whose
``volcano.sh/vgpu-cores`` (whole percent) rounds it up."""
DEVICE_RESOURCES = (*VGPU_RESOURCES, GPUSHARE_MEMORY, GPUSHARE_NUMBER, *HAMI_RESOURCES)
"""Resources whose fit the device level decides (besides the node's totals)."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GpuDevice(_Model):
    """One GPU of a node."""

    index: int
    """Position in the node's device list (Volcano's device ID)."""
    uuid: str = ""
    model: str = ""
    """The card's type as registered (``NVIDIA-Tesla T4``), or the node's ``gpu_spec``."""
    memory_mib: int = 0
    """Device memory in MiB; 0 when unknown (memory asks are then not checked on it)."""
    healthy: bool = True
    mode: str = ""
    """The register's sharing mode (``hami-core``, ``mig``; "" when not registered)."""
    shares: int | None = None
    """The most pods that may hold the device at once (the vGPU register's count, Volcano's ``Number``: its
    device-share plugin, like HAMi's scheduler, passes over a device that many pods hold); None: no limit (the
    gpushare plugin's cards)."""


class GpuShare(_Model):
    """A pod's ask at device level: ``count`` devices, on each ``milli`` of compute and ``memory_mib``."""

    count: int = 1
    milli: int = MILLI_PER_GPU
    """Compute per device, 0..1000 (1000: the whole card)."""
    memory_mib: int = 0
    """Memory per device in MiB (0: none asked)."""
    memory_percent: int = 0
    """``volcano.sh/vgpu-memory-percentage``: memory as a percent of the chosen device's (0: none)."""
    use_types: tuple[str, ...] = ()
    """``nvidia.com/use-gputype``: the device's type must contain one of these (case-insensitive)."""
    nouse_types: tuple[str, ...] = ()
    mode: str = ""
    """``volcano.sh/vgpu-mode``: the sharing mode the node's devices must be in (Volcano's plugin refuses a node
    in another; "" for any)."""
    spread: bool = False
    """``volcano.sh/vgpu-podgroup-policy: spread``: no device that a pod of the same PodGroup holds takes it
    (Volcano v1.15's vGPU fit, ``deviceHasPodFromSameGroup``)."""
    devices: tuple[int, ...] = ()
    """Where a running pod's share sits: device indices on its node, one per ``count``; () when not known
    (a pending pod, or a running one the plugin has not annotated)."""

    @property
    def whole(self) -> bool:
        """Each of its devices is taken whole."""
        return self.milli >= MILLI_PER_GPU or self.memory_percent >= 100

    @property
    def no_compute(self) -> bool:
        """A share naming no compute (``volcano.sh/vgpu-cores`` or HAMi's cores absent or 0): Volcano's vGPU fit
        counts it 0 cores (``gpushare.GpuAsk.no_compute``)."""
        return not self.whole and self.milli == 0
