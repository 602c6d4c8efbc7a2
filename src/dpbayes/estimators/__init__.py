"""Private Bayesian estimators with the scikit-learn interface (paper 004 §5).

scikit-learn is optional: with it installed the estimators are scikit-learn estimators
(``clone``, pipelines, ``check_estimator``); without it they keep the same methods.
"""

from dpbayes.estimators.linear_regression import PrivateBayesianLinearRegression
from dpbayes.estimators.logistic_regression import PrivateBayesianLogisticRegression
from dpbayes.estimators.naive_bayes import PrivateNaiveBayes

__all__ = [
    "PrivateBayesianLinearRegression",
    "PrivateBayesianLogisticRegression",
    "PrivateNaiveBayes",
]
