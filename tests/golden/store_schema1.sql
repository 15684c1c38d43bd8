-- aegisd's database layout before schema 2 (as written up to issue 12): the migration
-- tests (tests/test_runtime.cpp, tests/daemon/test_migration.py) build old databases from it.
CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, uid INTEGER NOT NULL, state TEXT NOT NULL,
  queue_seq INTEGER NOT NULL, submitted_at REAL NOT NULL, data TEXT NOT NULL);
CREATE INDEX jobs_state ON jobs(state);
CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, job_id INTEGER NOT NULL, t REAL NOT NULL,
  kind TEXT NOT NULL, detail TEXT NOT NULL);
CREATE INDEX events_job ON events(job_id);
CREATE TABLE history (signature TEXT PRIMARY KEY, peak_mib INTEGER NOT NULL, runs INTEGER NOT NULL,
  updated_at REAL NOT NULL);
CREATE TABLE quarantine (id INTEGER PRIMARY KEY, uid, state, data, reason TEXT, t REAL);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('schema', '1');
