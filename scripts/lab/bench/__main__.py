"""``python -m scripts.lab.bench`` prints which benchmarks there are and how each is run (the package's docstring);
each benchmark is its own module, ``python -m scripts.lab.bench.<name> --help``."""

import scripts.lab.bench

print(scripts.lab.bench.__doc__)
