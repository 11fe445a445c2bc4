/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* tests/test-prog-mpi.sh's MPI program, built there with Debian's mpicc: a
 * ping-pong between ranks 0 and 1 (8 octets to 256 KiB, each reply checked)
 * and 100 Allreduce sums over every rank; prints "ok N ranks". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv)
{
	int rank, n;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	static char buf[1 << 20];
	for (int sz = 8; sz <= (1 << 20); sz *= 32) {
		MPI_Barrier(MPI_COMM_WORLD);
		for (int i = 0; i < 50; i++) {
			if (rank == 0) {
				memset(buf, i, sz);
				MPI_Send(buf, sz, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
				MPI_Recv(buf, sz, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				if (buf[sz - 1] != (char)(i + 1)) { fprintf(stderr, "bad data\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
			} else if (rank == 1) {
				MPI_Recv(buf, sz, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				memset(buf, i + 1, sz);
				MPI_Send(buf, sz, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
			}
		}
	}
	long v = rank + 1, sum = 0;
	for (int i = 0; i < 100; i++)
		MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (sum != (long)n * (n + 1) / 2) { fprintf(stderr, "bad sum\n"); MPI_Abort(MPI_COMM_WORLD, 3); }
	if (rank == 0) printf("ok %d ranks\n", n);
	MPI_Finalize();
	return 0;
}
