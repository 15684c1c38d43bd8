# Convenience targets around the scripts (the scripts are the source of truth).
.PHONY: run test demo bench fuzz

run:    ## install, build, compare the policies on the published traces, then the daemon demo
	scripts/run.sh
test:   ## install, build, fuzz briefly, run the whole test suite (what CI runs)
	scripts/test.sh
demo:   ## aegisd on emulated GPUs with a burst of jobs, shown live
	scripts/deps.sh && AEGIS_TARGETS="aegis aegisd aegis-fakejob" scripts/build.sh && scripts/demo.sh
bench:  ## the benchmarks (figures, not pass/fail)
	scripts/deps.sh && scripts/build.sh && build/bench/bench_published && python3 bench/bench_speed.py build && build/bench/bench_gpu_sample && bench/bench_daemon.py build
fuzz:   ## longer fuzzing of the API parsers (60 s per target)
	scripts/fuzz.sh 60
