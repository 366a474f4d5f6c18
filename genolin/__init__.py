"""genolin: read genomes, tokenize DNA into k-mers, and train, evaluate and apply promoter classifiers.

Importing the package is cheap: torch and triton are imported only by the modules that need them.
"""

__version__ = "0.1.0"
