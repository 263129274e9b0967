/*
 * demo-service: the request loop of the hottext demo (see README.md).
 *
 *   demo-service [--requests N] [--serve]
 *
 * Answers N synthetic requests (default DEFAULT_REQUESTS), or with --serve
 * answers requests until SIGINT or SIGTERM (and at most N if --requests is
 * given).  Request i is the same in both modes, so a --serve run that did K
 * requests prints the checksum of --requests K.  Prints on stdout
 *
 *   requests: <count>
 *   checksum: <16 hex digits>
 *
 * and the request rate on stderr.  Exit status 0, or 2 on a usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "demo.h"

#define DEFAULT_REQUESTS 1000000ULL

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static uint64_t splitmix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Request i: a payload, and a handler chosen by its Zipf popularity. */
static uint64_t serve_one(uint64_t i)
{
	uint64_t x = splitmix64(demo_request_salt + i * 0x9e3779b97f4a7c15ULL);
	uint32_t slot = (uint32_t)(((x >> 32) * DEMO_HANDLERS) >> 32);
	unsigned h = (uint32_t)x < demo_alias_threshold[slot] ? slot : demo_alias_other[slot];

	return demo_handlers[h](x);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char usage_text[] = "usage: demo-service [--requests N] [--serve]\n";

static int usage(const char *msg, const char *arg)
{
	fprintf(stderr, "demo-service: %s: '%s'\n%s", msg, arg, usage_text);
	return 2;
}

int main(int argc, char **argv)
{
	uint64_t requests = DEFAULT_REQUESTS, done, sum = 0;
	int serve = 0, bounded = 0;
	double start, secs;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--serve") == 0) {
			serve = 1;
		} else if (strcmp(argv[i], "--requests") == 0) {
			const char *arg = i + 1 < argc ? argv[++i] : "";
			char *end;

			errno = 0;
			requests = strtoull(arg, &end, 10);
			if (errno || end == arg || *end || arg[0] == '-')
				return usage("--requests wants a non-negative integer", arg);
			bounded = 1;
		} else if (strcmp(argv[i], "--help") == 0) {
			fputs(usage_text, stdout);
			return 0;
		} else {
			return usage("unknown argument", argv[i]);
		}
	}
	if (serve) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_stop;
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		if (!bounded)
			requests = UINT64_MAX;
	}

	start = now();
	for (done = 0; done < requests && !stop_requested; done++)
		sum = (demo_rotl(sum, 7) ^ serve_one(done)) * 0x100000001b3ULL;
	secs = now() - start;

	printf("requests: %" PRIu64 "\nchecksum: %016" PRIx64 "\n", done, sum);
	fprintf(stderr, "demo-service: %" PRIu64 " requests in %.3f s, %.0f requests/s\n",
		done, secs, secs > 0 ? (double)done / secs : 0.0);
	return 0;
}
