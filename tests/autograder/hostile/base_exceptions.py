"""KeyboardInterrupt, SystemExit and bare BaseException from three parts."""
# %% [a0-square]
def square(x):
    raise KeyboardInterrupt
# %% [a0-square-backward]
def square_backward(x, grad):
    raise SystemExit("bye")
# %% [a0-pack]
class Sneaky(BaseException):
    pass

def pack(sizes, alignment):
    raise Sneaky("not an Exception")
