/* Monotonic time in seconds; what deadlines in the kernel's loop are measured in. */
#ifndef TAAS_CLOCK_H
#define TAAS_CLOCK_H

double taas_now(void);

#endif
