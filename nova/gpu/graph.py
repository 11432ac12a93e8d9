"""CUDA graphs: capture the launches of a function on a stream once, replay them with one call.

A captured graph records kernel parameters (device addresses) by value, so everything it
touches must stay at fixed addresses between replays: the executable keeps one graph per set of
input addresses (arguments read where they are, nova/gpu/executable.py) and reads its outputs
from fixed buffers after `replay`.
"""

from __future__ import annotations

from nova.gpu import driver as _drv


class Graph:
    """`Graph.capture(stream, fn)` runs fn() (which queues work on `stream`) under stream
    capture and instantiates the result; `replay()` launches the whole graph on that stream.

    Raises CudaGraphError when capture fails (e.g. fn synchronized the stream or used the
    legacy default stream during capture)."""

    def __init__(self, stream, graph, exec_handle):
        self.stream = stream
        self.graph = graph
        self.exec = exec_handle

    @classmethod
    def capture(cls, stream, fn) -> Graph:
        d = _drv.driver()
        mode = d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        _drv.call("cuStreamBeginCapture", stream.handle, mode)
        try:
            fn()
        except BaseException:
            # End the capture so the stream is usable again; the partial graph is discarded.
            res = d.cuStreamEndCapture(stream.handle)
            if res[0] == d.CUresult.CUDA_SUCCESS and res[1] is not None:
                d.cuGraphDestroy(res[1])
            raise
        graph = _drv.call("cuStreamEndCapture", stream.handle)
        exec_handle = _drv.call("cuGraphInstantiate", graph, 0)
        return cls(stream, graph, exec_handle)

    def replay(self, stream=None) -> None:
        """Queues one execution of the graph on `stream` (default: the stream it was captured
        on; asynchronous)."""
        _drv.call("cuGraphLaunch", self.exec, (stream or self.stream).handle)

    def __del__(self):
        try:
            if getattr(self, "exec", None) is not None:
                _drv.call("cuGraphExecDestroy", self.exec)
            if getattr(self, "graph", None) is not None:
                _drv.call("cuGraphDestroy", self.graph)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
