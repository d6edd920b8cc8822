"""The judge (notebook 04, paper §3.4): three votes per answer, dataset-aware grading, the accuracy
tables."""

# ruff: noqa: F401 - the names the notebooks use
from memcost.judge.accuracy import (
    accuracy_table,
    answer_length_table,
    category_table,
    comparability,
    facts_if_built,
    failure_analysis,
    mcnemar_table,
    paper_comparison,
    sensitivity_table,
    step_metrics,
)
from memcost.judge.questions import plan_judging, system_inventory
from memcost.judge.votes import judge_one, judge_requests, question_outcomes, run_judging
from memcost.stats import UNJUDGED
