"""Streams and events (timing with cuEventElapsedTime)."""

from __future__ import annotations

from nova.gpu import driver as _drv
from nova.gpu.device import context


class Stream:
    """A non-blocking CUDA stream of the default device (`handle` is the CUstream)."""

    def __init__(self, ordinal: int | None = None):
        self.ctx = context(ordinal)
        d = _drv.driver()
        self.handle = _drv.call("cuStreamCreate", int(d.CUstream_flags.CU_STREAM_NON_BLOCKING))

    def synchronize(self) -> None:
        """Waits for the stream's work; raises the CudaError of a failed kernel."""
        _drv.call("cuStreamSynchronize", self.handle)

    def wait_event(self, event: Event) -> None:
        """Later work on this stream waits for `event` (recorded on any stream)."""
        _drv.call("cuStreamWaitEvent", self.handle, event.handle, 0)

    def record(self, event: Event | None = None) -> Event:
        """Records `event` (a new one if None) at this point of the stream and returns it."""
        event = event or Event()
        event.record(self)
        return event

    def close(self) -> None:
        """Destroys the stream (after its queued work completes, as cuStreamDestroy does)."""
        if getattr(self, "handle", None) is not None:
            try:
                _drv.call("cuStreamDestroy", self.handle)
            finally:
                self.handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: the driver may be gone
            pass


class Event:
    """A CUDA event; `elapsed_ms(start, end)` times the work between two recorded events."""

    def __init__(self, timing: bool = True):
        context()
        d = _drv.driver()
        f = d.CUevent_flags
        flags = f.CU_EVENT_DEFAULT if timing else f.CU_EVENT_DISABLE_TIMING
        self.handle = _drv.call("cuEventCreate", int(flags))

    def record(self, stream: Stream | None = None) -> None:
        """Records the event on `stream` (None: the legacy default stream)."""
        _drv.call("cuEventRecord", self.handle, stream.handle if stream is not None else 0)

    def synchronize(self) -> None:
        """Waits until the work before the event's record has completed."""
        _drv.call("cuEventSynchronize", self.handle)

    @staticmethod
    def elapsed_ms(start: Event, end: Event) -> float:
        """Milliseconds between two recorded events (waits for `end`)."""
        end.synchronize()
        return float(_drv.call("cuEventElapsedTime", start.handle, end.handle))

    def __del__(self):
        try:
            if getattr(self, "handle", None) is not None:
                _drv.call("cuEventDestroy", self.handle)
        except Exception:  # noqa: BLE001
            pass


_default: dict[int, Stream] = {}


def default_stream(ordinal: int | None = None) -> Stream:
    """Nova's stream on a device (one per device, created on first use)."""
    ctx = context(ordinal)
    s = _default.get(ctx.ordinal)
    if s is None:
        s = _default[ctx.ordinal] = Stream(ctx.ordinal)
    return s
