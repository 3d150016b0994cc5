//! The examples and exit codes shown at the end of each command's `--help`
//! (clap `after_help`). Keep them short: three to five examples, then the codes.

/// `legcrawl crawl --help`.
pub const CRAWL: &str = "\
A crawl is a stored job: the settings under \"Job settings\" are kept in the
state, so `legcrawl crawl --data D` alone runs the stored job exactly; a setting
given changes it from that run on (one line per change), and `--config FILE`
replaces it. `legcrawl dump job` prints it as a crawl file.

Examples:
  legcrawl crawl https://example.org/ --data data/example --max-pages 100
  legcrawl crawl --data data/example                  # resume, or start the next cycle
  legcrawl crawl --data data/example --delay 2s       # change the stored job
  legcrawl crawl --config data/examples/docs.toml --stats run.json
  legcrawl crawl https://example.org/ --output items.jsonl --until-idle
  legcrawl crawl https://example.org/ --warc warc/ --warc-max-size 1GB   # WARC 1.1 files
  legcrawl crawl https://example.org/ --shared redis://10.0.0.5:6379/0 --name docs  # one worker

Exit codes:
  0    the run fetched pages, or nothing was due (drained, a limit reached, idle)
  1    an error in the state or the program (disk, database, a Redis server that
       cannot be reached at start)
  2    bad input, one line (a URL, a flag such as --timeout 0, the crawl file, a
       directory that is not a state, a busy state), or a damaged state that
       cannot be repaired (left as it is; see `legcrawl repair --help`)
  4    requests were made and every one failed on the network (refused, DNS, TLS,
       timeout), as wget
  8    no page answered well (2xx, 304) and some request was answered with an
       error status (4xx/5xx: a mistyped seed, a server that only fails, a refused
       proxy password), as wget; some broken links among good pages are 0
  3    a shared worker saw Redis lose committed completions (a lost AOF tail, a
       failover): named in one line, the crawl went on and fetched them again
  130  interrupted by Ctrl-C or SIGTERM (state saved; `legcrawl crawl --data D` resumes)";

/// `legcrawl dump --help`.
pub const DUMP: &str = "\
Examples:
  legcrawl dump --data data/example                       # the summary
  legcrawl dump items --data data/example --limit 3
  legcrawl dump items --data data/example --format csv --fields url,status,title
  legcrawl dump items --data data/example --run last      # what the newest run stored
  legcrawl dump items --data data/example --since-run 4   # what runs after 4 stored
  legcrawl dump runs --config crawl.toml --json
  legcrawl dump job --data data/example > job.toml        # the stored job, a crawl file
  legcrawl dump --shared redis://10.0.0.5:6379/0 --name docs   # a shared crawl, its workers

Every view works while a crawl runs on the state: the crawl answers it (through
read.sock in the state directory) with the state as of its last durable group.

Exit codes:
  0  printed (also when the reader closed the pipe early)
  1  a runtime failure (disk, database, a record that cannot be read, Redis unreachable,
     the running crawl's answer cut short because it closed the state)
  2  bad input (a flag, a run that does not exist, not a URL, not a state, a busy state),
     or a damaged state that cannot be repaired (left as it is)";

/// `legcrawl fetch --help`.
pub const FETCH: &str = "\
Examples:
  legcrawl fetch https://example.org/ > page.html
  legcrawl fetch -I https://example.org/
  legcrawl fetch https://example.org/big.iso -o big.iso --read-timeout 30

Exit codes:
  0  fetched
  2  HTTP error status (the error document goes to stderr)
  3  connection or URL error
  4  forbidden by robots.txt (also while its robots.txt cannot be read)
  5  read error (a stalled read, a malformed response, a body that cannot be decoded)
  6  the bytes read do not match Content-Length
  7  the body was longer than 10 MiB and was cut (what was kept is written)";

/// `legcrawl reparse --help`.
pub const REPARSE: &str = "\
A page's items are made by the legs of the job version that fetched it. When
the legs change (`--config` with new `[[legs]]`), the pages already stored
keep their items until they change; `reparse` runs the legs in force over the
responses the crawl kept in its WARC files instead, as a run of its own:
their new items, and deletion records for the items the legs no longer make,
go to the change feed (`dump items --run N`) and to the job's --output; links
now in scope are queued for the next crawl run. Nothing is fetched. Ctrl-C or
kill -9 lose nothing: run it again to go on. A page fetched before the crawl
wrote WARC files has no stored response; it is counted and runs the legs at
its next change. A crawl that wrote no WARC files is refused.

Examples:
  legcrawl reparse --data data/docs
  legcrawl reparse --data data/docs --config docs-with-prices.toml

Exit codes:
  0    the legs ran over every stored response they had not seen
  1    a runtime failure (disk, database)
  2    bad input: no state, a shared crawl, no WARC files, a bad crawl file
  130  interrupted (Ctrl-C); run it again to go on";

/// `legcrawl repair --help`.
pub const REPAIR: &str = "\
Every open checks the state: a database holding less than the `durable` record
says was committed, or one sled cannot read, is refused (exit 2, left as it is;
restore the directory from a copy). In exact dedup mode a missing, truncated or
damaged bloom.bin, or one that lost bits, is rebuilt from the exact seen set by
any command; `repair` reads every record and rebuilds it on demand. In bloom
mode the filter is the only record of the seen set and cannot be rebuilt.
The page-id index (runs/*.ids) is rebuilt from the page records when one of
its files is missing or cut short (any command) or fails its checksum
(`repair`). The exact seen set's runs (runs/*.run) have no second copy: a
damaged one is refused (exit 2).

Examples:
  legcrawl repair --data data/example
  legcrawl repair --config crawl.toml

Exit codes:
  0  every record read; the Bloom filter rebuilt (exact mode)
  1  a runtime failure (disk, database, a record that cannot be read)
  2  bad input, or a damaged state that cannot be repaired (left as it is)";

/// `legcrawl reset --help`.
pub const RESET: &str = "\
Examples:
  legcrawl reset --data data/example          # asks first
  legcrawl reset --config crawl.toml --yes    # the crawl file's `data`, no question

Exit codes:
  0  deleted, or nothing to delete (a missing or empty directory: it says so)
  1  not confirmed, or a runtime failure
  2  bad input (not a state directory, a busy state, no --yes without a terminal)";

/// `legcrawl seeds --help`.
pub const SEEDS: &str = "\
Examples:
  legcrawl seeds --data data/example                        # list them
  legcrawl seeds add https://example.org/news/ --data data/example
  legcrawl seeds remove https://unreachable.example/ --data data/example

Exit codes:
  0  listed, added or removed
  1  a runtime failure (disk, database)
  2  bad input (not an http(s) URL, not a seed of this state, not a state, a busy state)";

/// `legcrawl serve --help`.
pub const SERVE: &str = "\
Examples:
  legcrawl serve --data data/example          # http://127.0.0.1:9477/ and /metrics
  legcrawl serve --data data/example --listen 0.0.0.0:9477 --token \"$(cat token)\"
  legcrawl serve --shared redis://127.0.0.1:6379/0 --name example

Read-only: it never opens the database nor takes its lock, so crawls start and
end beside it. See docs/serve.md for the page, the JSON endpoints and the metrics.

Exit codes:
  0  stopped by SIGINT or SIGTERM
  1  the address cannot be bound, or Redis cannot be reached at start
  2  bad input (a bad --listen, a non-loopback --listen without --token)";
