-- Loads pgbench's tables into shared_buffers (load.sh and sim.py run it at the start of each
-- run: every run starts a fresh server, and a cold buffer pool would make the first seconds of
-- each run a disk-cache benchmark).
SELECT sum(pg_prewarm(t)) FROM unnest(array['pgbench_accounts', 'pgbench_accounts_pkey',
    'pgbench_branches', 'pgbench_tellers', 'pgbench_history']) AS t;
