"""A request being served: its tokens, sampling state, block accounting and timing.

A ``Sequence`` moves WAITING -> RUNNING -> FINISHED, and back from RUNNING to WAITING when it is preempted
(its blocks are freed; on readmission its prompt *and* the tokens generated so far are prefilled again,
"recompute" preemption). Its sampling generator is never reset, so the tokens that follow a preemption are
the ones it would have drawn anyway.
"""
import enum
import time
from dataclasses import dataclass, field


class Status(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


class Sequence:
    def __init__(self, seq_id, prompt, params, arrival_time=None):
        self.seq_id, self.params = seq_id, params
        self.prompt = list(prompt)
        self.tokens = list(prompt)            # prompt + generated
        self.num_computed = 0                 # leading tokens whose keys and values are in the pool
        self.max_len = len(self.prompt) + params.max_tokens   # the engine caps it at the model's context
        self.status = Status.WAITING
        self.finish_reason = None             # "stop" | "length" | "refused"
        self.error = None                     # why a request was refused
        self.rng = params.make_generator()
        self.arrival_time = time.perf_counter() if arrival_time is None else arrival_time
        self.token_times = []                 # when each output token was produced
        self.num_preemptions = 0
        self.admitted_at = None               # scheduler step of the latest admission

    @property
    def output(self):
        return self.tokens[len(self.prompt):]

    def __len__(self):
        return len(self.tokens)

    def __repr__(self):
        return f"Sequence({self.seq_id!r}, {self.status.value}, {len(self.prompt)}+{len(self.output)} tokens)"


@dataclass
class RequestOutput:
    """What a finished request returns: its tokens, why it ended, and its timing (seconds)."""
    request_id: object
    prompt_token_ids: list
    token_ids: list
    finish_reason: str
    error: str = None
    arrival_time: float = 0.0
    token_times: list = field(default_factory=list)
    num_preemptions: int = 0

    @property
    def ttft(self):
        """Time to first token (None when none was produced)."""
        return self.token_times[0] - self.arrival_time if self.token_times else None

    @property
    def inter_token_latencies(self):
        t = self.token_times
        return [b - a for a, b in zip(t, t[1:])]

    @classmethod
    def of(cls, seq):
        return cls(seq.seq_id, list(seq.prompt), list(seq.output), seq.finish_reason, seq.error,
                   seq.arrival_time, list(seq.token_times), seq.num_preemptions)
