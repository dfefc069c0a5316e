"""Parent-only helpers of the a6_data_parallel spec: where the numbers in a rank's messages and results came
from (``dataflow``). The sandboxed child never imports this package."""
