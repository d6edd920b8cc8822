"""The numbers *Total Recall at What Cost? Benchmarking the Serving Cost of Agentic Memory
Systems* publishes (Pollertlam & Kornsuwannawit, August 2026; ranges over its backbones and
reasoning efforts, as printed), so notebook 06 and the report compare against the same values.
Its tables are numbered as that study numbers them ("Total Recall §...")."""

# Table 1, transparent baselines: fitted exponents, R² and leave-one-cell-out MAPE (%).
EXPONENTS: dict[str, dict[str, tuple[float, float] | None]] = {
    "full_history": {
        "p": (0.95, 0.97),
        "q": (0.94, 0.97),
        "r2": (0.996, 0.999),
        "loocv_mape": (2.9, 5.3),
        "r2_total": None,
    },
    "rolling_window": {
        "p": (0.85, 0.92),
        "q": (0.10, 0.12),
        "r2": (0.91, 0.95),
        "loocv_mape": (6.1, 6.5),
        "r2_total": (0.39, 0.40),
    },
}
# Memory systems fit badly: held-out errors (LOOCV-MAPE, %), worst cell about 1.9x off.
MEMORY_LOOCV_MAPE: dict[str, tuple[float, float]] = {
    "mem0": (18.4, 22.2),
    "hindsight": (46.1, 47.8),
    "observational": (40.8, 68.5),
}
WORST_CELL_RATIO = 1.9
# Break-even at N = 400, L = 200, gpt-oss-20b at low effort (turns; 0 = from the start).
BREAK_EVEN_400_200 = {"observational": 0, "mem0": 82, "hindsight": 356}
BREAK_EVEN_SETTING = {"cell": "400×200", "model": "gpt-oss-20b", "reasoning_effort": "low"}
# The main grid (N turns, L mean tokens per turn) and the seeds per memory-system cell.
GRID = ((15, 50), (15, 200), (100, 100), (400, 50), (400, 200))
SEEDS_PER_CELL = 8
# The LoCoMo accuracy subset: 4 whole conversations, 665 questions without category 5.
SUBSET_CONVERSATIONS = 4
SUBSET_QUESTIONS = 665
