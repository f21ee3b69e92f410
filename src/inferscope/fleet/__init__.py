"""Many traces at once: `inferscope analyze` over several inputs (``batch``: local worker processes through
``batch_pool``, or Ray tasks; ``batch_out``: summary/findings JSONL and Parquet), the cross-rank comparison of a job's
ranks (``cross_rank``, ``cross_rank_comm``, ``cross_rank_finding``), and `inferscope sweep` (``sweep``: one
`inferscope run` per parameter combination)."""
