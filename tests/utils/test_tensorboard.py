"""SummaryWriter writes TensorBoard event files that read back with the values logged (tensors included)."""
import glob
import os
import struct

import pytest

import minigrad as mg

pytest.importorskip("tensorboardX")
from tensorboardX.proto import event_pb2  # noqa: E402

from minigrad.utils.tensorboard import SummaryWriter  # noqa: E402


def _events(directory):
    (path,) = glob.glob(os.path.join(directory, "events.out.tfevents.*"))
    data, pos, out = open(path, "rb").read(), 0, []
    while pos < len(data):                            # TFRecord: length, crc, payload, crc
        n = struct.unpack("<Q", data[pos:pos + 8])[0]
        ev = event_pb2.Event()
        ev.ParseFromString(data[pos + 12:pos + 12 + n])
        pos += 12 + n + 4
        out += [(v.tag, ev.step, v) for v in ev.summary.value]
    return out


def test_scalars_and_histograms_of_tensors_read_back(tmp_path):
    with SummaryWriter(log_dir=str(tmp_path)) as w:
        w.add_scalar("Loss/train", mg.tensor(1.5), 3)
        w.add_scalar("Loss/test", 0.25, 3)
        w.add_scalars("lr", {"a": mg.tensor(0.5), "b": 0.125}, 4)
        w.add_histogram("weights", mg.arange(10.0), 5)
        w.flush()
    events = _events(tmp_path)
    scalars = {(tag, step): v.simple_value for tag, step, v in events if v.HasField("simple_value")}
    assert scalars[("Loss/train", 3)] == 1.5 and scalars[("Loss/test", 3)] == 0.25
    (hist,) = [v.histo for tag, step, v in events if tag == "weights"]
    assert (hist.min, hist.max, hist.num, hist.sum) == (0.0, 9.0, 10.0, 45.0)
