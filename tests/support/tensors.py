"""tensors.py: the tool's JSON tensors as the python tests read them.

    flat(t)   the numbers of a tensor, row-major: t is {"dtype", "shape", "data"}, nested lists
              of numbers (or of such tensors), or one number
"""


def flat(t):
    """the numbers of t in row-major order, as one list (see the top of this file)"""
    if isinstance(t, dict):
        return flat(t['data'])
    if isinstance(t, list):
        return [y for e in t for y in flat(e)]
    return [t]
