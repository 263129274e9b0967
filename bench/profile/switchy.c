/*
 * switchy: a fixed amount of request/response work between two threads over pipes, so that
 * every request costs two context switches, as in a server that switches context often.
 *
 *   switchy ROUNDS SPIN
 *
 * Each round: the client writes a byte, the server reads it, spins SPIN steps of a hash
 * (through a call chain of three functions), and answers; the client spins too. Prints the
 * wall time of the rounds in seconds. SPIN=100 switches context ~100k times a second; a large
 * SPIN makes it compute-bound.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int to_server[2], to_client[2];
static long rounds;
static int spin;

__attribute__((noinline)) static unsigned mix(unsigned x)
{
	volatile unsigned slot = x;
	slot = slot * 1103515245u + 12345u;
	return slot;
}

__attribute__((noinline)) static unsigned step(unsigned x)
{
	return mix(x) ^ (x >> 3);
}

__attribute__((noinline)) static unsigned work(unsigned x, int n)
{
	for (int i = 0; i < n; i++)
		x = step(x);
	return x;
}

static void *server(void *arg)
{
	unsigned x = 1;
	char c;

	(void)arg;
	for (long i = 0; i < rounds; i++) {
		if (read(to_server[0], &c, 1) != 1)
			break;
		x = work(x, spin);
		if (write(to_client[1], &c, 1) != 1)
			break;
	}
	return (void *)(unsigned long)x;
}

int main(int argc, char **argv)
{
	struct timespec start, end;
	pthread_t thread;
	unsigned x = 1;
	char c = 'x';

	if (argc != 3) {
		fprintf(stderr, "usage: switchy ROUNDS SPIN\n");
		return 2;
	}
	rounds = atol(argv[1]);
	spin = atoi(argv[2]);
	if (pipe(to_server) || pipe(to_client) || pthread_create(&thread, NULL, server, NULL))
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (long i = 0; i < rounds; i++) {
		if (write(to_server[1], &c, 1) != 1 || read(to_client[0], &c, 1) != 1)
			return 1;
		x = work(x, spin);
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	pthread_join(thread, NULL);
	printf("%.4f\n", (double)(end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) * 1e-9);
	fprintf(stderr, "switchy: checksum %u\n", x);
	return 0;
}
