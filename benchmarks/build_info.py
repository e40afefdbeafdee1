"""Which torch_ringreduce build a benchmark runs: its `_C` file and when it
was built. Python takes whichever `torch_ringreduce` it finds first, and an
editable install follows the checkout last installed (a fresh-clone CI run
moves it), so an A/B of two builds in one checkout that forgets
`PYTHONPATH=$PWD` times one build twice (docs/BENCHMARKS.md)."""
import datetime
import os


def loaded_build():
    import torch_ringreduce._C as c

    built = datetime.datetime.fromtimestamp(os.path.getmtime(c.__file__), datetime.timezone.utc)
    return f"torch_ringreduce from {c.__file__} (built {built:%Y-%m-%d %H:%M:%S} UTC)"
