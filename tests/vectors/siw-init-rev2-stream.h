/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Linux siw's FPDUs to a host peer (vector init-rev2-crc1 and -crc0 of
 * ../shared/siw-peer/vectors): two Sends and a Read Response, CRC on and
 * off.  Facts, shared by tests/test-iw-stream.c and the fuzz corpus. */
#ifndef SIW_INIT_REV2_STREAM_H
#define SIW_INIT_REV2_STREAM_H

static const char siw_crc1[] =
	/* Send MSN 1 (rping's start buffer info) */
	"00 22 41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 55 87 ce 6d 93 70 e0 03 ac 00"
	"00 00 00 40 43 fd ef d7"
	/* Read Response to STag 0x0a0b0c0d TO 0x10000, 64 bytes */
	"00 4e c1 42 0a 0b 0c 0d 00 00 00 00 00 01 00 00 72 64 6d 61 2d 70 69 6e 67 2d 30 3a 20 41 42 43"
	"44 45 46 47 48 49 4a 4b 4c 4d 4e 4f 50 51 52 53 54 55 56 57 58 59 5a 5b 5c 5d 5e 5f 60 61 62 63"
	"64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 71 72 00 48 80 b2 72"
	/* Send MSN 2 */
	"00 22 41 43 00 00 00 00 00 00 00 00 00 00 00 02 00 00 00 00 00 00 55 87 ce 6d 95 50 e1 92 60 00"
	"00 00 00 40 1e ce 3e 12";

static const char siw_crc0[] =
	"00 22 41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 55 8f 38 e0 0d 50 02 e5 57 00"
	"00 00 00 40 00 00 00 00"
	"00 4e c1 42 0a 0b 0c 0d 00 00 00 00 00 01 00 00 72 64 6d 61 2d 70 69 6e 67 2d 30 3a 20 41 42 43"
	"44 45 46 47 48 49 4a 4b 4c 4d 4e 4f 50 51 52 53 54 55 56 57 58 59 5a 5b 5c 5d 5e 5f 60 61 62 63"
	"64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 71 72 00 00 00 00 00"
	"00 22 41 43 00 00 00 00 00 00 00 00 00 00 00 02 00 00 00 00 00 00 55 8f 38 e0 0f 30 01 ba 29 00"
	"00 00 00 40 00 00 00 00";

#endif
