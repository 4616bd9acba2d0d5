"""Model selection in two passes: cross-validation and grid search from mergeable statistics.

For estimators whose fit is one pass of mergeable statistics, each fold's statistics are
computed once, the model of "all folds but k" is their merge, every candidate of a grid is a
solve on the client, and every (fold, candidate) pair is scored on its held-out rows in one
more pass: two passes over the data however many folds and candidates
(docs/user-guide/model-selection.md).
"""

from ddr.model_selection._hash_split import hash_train_test_split
from ddr.model_selection._passes import SearchPlan
from ddr.model_selection._scoring import SCORINGS
from ddr.model_selection._search import GridSearchCV, cross_validate
from ddr.model_selection._split import HashKFold

__all__ = [
    "SCORINGS",
    "GridSearchCV",
    "HashKFold",
    "SearchPlan",
    "cross_validate",
    "hash_train_test_split",
]
