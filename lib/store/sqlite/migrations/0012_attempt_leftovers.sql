-- 0012: what an attempt's launcher does with the processes its job leaves behind
-- (docs/decisions/0302): recorded so `pidfence show` can say that `keep` was chosen (the leftovers
-- live on after the run's end). NULL: not stated, the default `stop`.

ALTER TABLE attempts ADD COLUMN leftovers TEXT CHECK (leftovers IS NULL OR leftovers = 'stop' OR leftovers = 'keep');
