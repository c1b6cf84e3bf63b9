-- 0004: reserved for the management plane's migration (helper/management). This placeholder keeps the
-- numbering gap-free on the execution branch; the management file replaces it when both are merged.
SELECT 1;
