"""``python -m core.claims``: measure every claim and write benchmarks/results/claims.md and .json."""

from core.claims.report import main

raise SystemExit(main())
