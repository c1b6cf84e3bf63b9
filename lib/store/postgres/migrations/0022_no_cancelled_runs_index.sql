-- 0022: the cancelled, still active runs' index goes (docs/decisions/0445). No query has read it
-- since the due query moved to the dispatch table's own index (docs/decisions/0022), and it misled
-- the planner: its statistics, kept while few cancels are open, say it is almost empty, so the
-- project cancel's statements searched a page of N runs through it, the whole index once per run
-- (N² comparisons). Without it, a page's runs are found by primary key.
DROP INDEX runs_cancel_open;
