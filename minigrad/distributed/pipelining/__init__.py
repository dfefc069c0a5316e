"""Pipeline parallelism with PyTorch's ``torch.distributed.pipelining`` names: ``PipelineStage`` (one stage per
rank, send/recv of activations and gradients) and the schedules ``ScheduleGPipe`` and ``Schedule1F1B``."""
from .schedules import (PipelineSchedule, Schedule1F1B, ScheduleGPipe, bubble_fraction, gpipe_order,
                        one_f_one_b_order)
from .stage import PipelineStage, average_gradients

__all__ = ["PipelineStage", "PipelineSchedule", "Schedule1F1B", "ScheduleGPipe", "average_gradients",
           "bubble_fraction", "gpipe_order", "one_f_one_b_order"]
