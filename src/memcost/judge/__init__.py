"""The judge (notebook 04, study §3.4): three votes per answer, dataset-aware grading, honest
accuracy tables.

An LLM reads the question, the benchmark's reference and a system's response, and says CORRECT
or WRONG as JSON with a one-sentence reason. Each answer is judged ``n_votes`` times; the paper
reports the majority, the EverMemOS framework the mean ± std of the votes' accuracies.

The files follow the notebook: ``questions`` (which answers are scored), ``instructions`` and
``requests`` (what the judge is told), ``votes`` (three votes, the majority), ``accuracy``
(Table 3, categories, the paper's numbers), ``compare`` (paired test, answer length, judge
wording), ``failures`` (Table 6). Offline there is no LLM: the lexical rule of
:mod:`memcost.offline` stands in, and every output names it ``lexical``. The votes file is
owned by :mod:`memcost.answers`; the figure is :mod:`memcost.plots.judge`.
"""

from memcost.answers import JUDGMENT_FIELDS, primary
from memcost.answers import read_judgments as load_judgments
from memcost.judge.accuracy import (
    accuracy_table,
    category_table,
    comparability,
    paper_comparison,
    single_value,
    step_metrics,
)
from memcost.judge.compare import answer_length_table, mcnemar_table, sensitivity_table
from memcost.judge.failures import (
    FAILURE_TAGS,
    TAG_COREFERENCE,
    TAG_NONE,
    TAG_NOT_RETRIEVED,
    TAG_TEMPORAL,
    TAG_UPDATE,
    facts_if_built,
    failure_analysis,
    tag_failure,
)
from memcost.judge.instructions import INSTRUCTIONS, LME_TYPES, Instruction, choose_instruction
from memcost.judge.questions import (
    JudgeItem,
    JudgePlan,
    load_questions,
    plan_judging,
    scored_questions,
    system_inventory,
)
from memcost.judge.requests import (
    LETTER_MATCH,
    RULE,
    JudgePayload,
    judge_prompt,
    judge_requests,
    parse_verdict,
    prompt_version,
)
from memcost.judge.votes import JudgingRun, judge_one, question_outcomes, rule_records, run_judging
from memcost.offline import (
    LEXICAL,
    LEXICAL_RULES,
    LexicalRule,
    abstains,
    lexical_judge,
    lexical_verdict,
)
from memcost.stats import CORRECT, UNJUDGED, WRONG

load_facts = facts_if_built  # the name notebook 04 used: None when there is no memory

__all__ = [
    "CORRECT",
    "FAILURE_TAGS",
    "INSTRUCTIONS",
    "JUDGMENT_FIELDS",
    "LETTER_MATCH",
    "LME_TYPES",
    "LEXICAL",
    "LEXICAL_RULES",
    "RULE",
    "TAG_COREFERENCE",
    "TAG_NONE",
    "TAG_NOT_RETRIEVED",
    "TAG_TEMPORAL",
    "TAG_UPDATE",
    "UNJUDGED",
    "WRONG",
    "Instruction",
    "JudgeItem",
    "JudgePayload",
    "JudgePlan",
    "JudgingRun",
    "LexicalRule",
    "abstains",
    "accuracy_table",
    "answer_length_table",
    "category_table",
    "choose_instruction",
    "comparability",
    "facts_if_built",
    "failure_analysis",
    "judge_one",
    "judge_prompt",
    "judge_requests",
    "lexical_judge",
    "lexical_verdict",
    "load_facts",
    "load_judgments",
    "load_questions",
    "mcnemar_table",
    "paper_comparison",
    "parse_verdict",
    "plan_judging",
    "primary",
    "prompt_version",
    "question_outcomes",
    "rule_records",
    "run_judging",
    "scored_questions",
    "sensitivity_table",
    "single_value",
    "step_metrics",
    "system_inventory",
    "tag_failure",
]
