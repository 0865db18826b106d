/* The interpreter: what the protocol layer calls. It knows nothing of ZeroMQ or Jupyter
 * messages; the kernel hands it a taas_io to write outputs through.
 *
 * Running a cell never blocks the kernel: taas_interp_run runs statements until the cell
 * ends or a statement waits (sleep, later a training job); the kernel then keeps serving
 * control requests and calls taas_interp_resume when taas_interp_deadline has passed. */
#ifndef TAAS_INTERP_H
#define TAAS_INTERP_H

#include <jansson.h>

#include "clock.h"
#include "error.h"

struct taas_interp;
typedef struct taas_interp taas_interp;

/* Outputs of a running cell. The kernel implements these; the interpreter calls them
 * in order. Every string is valid UTF-8. json arguments are stolen. */
struct taas_io {
    void *ctx;
    void (*stream)(void *ctx, const char *name /* "stdout" | "stderr" */, const char *text);
    /* display_data (update = 0) or update_display_data (update = 1); display_id may be NULL */
    void (*display)(void *ctx, json_t *data, json_t *metadata, const char *display_id, int update);
    void (*clear_output)(void *ctx, int wait);
    /* a pager payload for the execute_reply (help()) */
    void (*page)(void *ctx, json_t *data);
    /* exit(), quit(): the reply asks the front end to end the session (may be NULL) */
    void (*ask_exit)(void *ctx);
};
typedef struct taas_io taas_io;

typedef enum taas_run_state {
    TAAS_RUN_DONE,   /* the cell finished; *result holds the execute_result bundle or NULL */
    TAAS_RUN_ERROR,  /* the cell failed; err says why */
    TAAS_RUN_WAIT,   /* a statement waits; call taas_interp_resume after the deadline */
} taas_run_state;

taas_interp *taas_interp_new(void);
void taas_interp_free(taas_interp *in);

/* An io that drops what a cell says (the one a NULL io stands for): start from a copy of it
 * to keep only some of the outputs. */
const taas_io *taas_interp_quiet_io(void);

/* Starts a cell. The io must outlive the cell (until DONE or ERROR); NULL: the quiet one. */
taas_run_state taas_interp_run(taas_interp *in, const char *code, const taas_io *io,
                               json_t **result, taas_error *err);
taas_run_state taas_interp_resume(taas_interp *in, json_t **result, taas_error *err);
/* Monotonic time (taas_now) at which the waiting statement wants to be resumed; < 0 when
 * the interpreter is not waiting. */
double taas_interp_deadline(const taas_interp *in);
/* The file descriptor the waiting statement waits on besides its deadline (show() waits
 * on its taas-worker's output), or -1. The kernel polls it for reading while the cell
 * waits and calls taas_interp_resume when it is readable (or at its end) or when the
 * deadline has passed; resume returns TAAS_RUN_WAIT again while there is more to wait for. */
int taas_interp_wait_fd(const taas_interp *in);
/* A descriptor that becomes readable when the kernel is asked to stop (its signal
 * self-pipe; never read by the interpreter): the short synchronous waits of a cell (a
 * dataset's probe) watch it and end with KeyboardInterrupt. -1 (the default): none. */
void taas_interp_set_interrupt_fd(taas_interp *in, int fd);
/* A check a long synchronous part of a cell (a walk over values) makes now and then: 1 ends
 * it with KeyboardInterrupt (the kernel serves its control channel in it: an
 * interrupt_request). NULL (the default): none. */
void taas_interp_set_interrupt_check(taas_interp *in, int (*check)(void *ctx), void *ctx);
/* Ends the waiting statement: the next resume returns TAAS_RUN_ERROR with ename
 * KeyboardInterrupt. Without a waiting cell it does nothing. */
void taas_interp_interrupt(taas_interp *in);

/* is_complete: "complete", "incomplete" or "invalid" (static strings). */
const char *taas_interp_is_complete(taas_interp *in, const char *code);

/* complete: matches for the text before cursor_byte; *start and *end (bytes) delimit the
 * text the matches replace. New reference: a JSON array of strings. */
json_t *taas_interp_complete(taas_interp *in, const char *code, size_t cursor_byte,
                             size_t *start, size_t *end);

/* inspect: a mime bundle about the name at cursor_byte, or NULL when there is none.
 * detail_level 1 adds the parameter table. */
json_t *taas_interp_inspect(taas_interp *in, const char *code, size_t cursor_byte,
                            int detail_level);

/* Session state that actions use (register, unregister, messages that name a value). */
struct taas_value;

/* Adds a DataLoader to the loaders that pragma cells fan out to CPU workers. Registering
 * one that is already registered does nothing; registering a new value bound to the same
 * variable as an earlier one (a re-run cell) replaces the earlier one in place.
 * -1 with a TaasTypeError when loader is not a DataLoader. */
int taas_interp_register_loader(taas_interp *in, struct taas_value *loader, taas_error *err);
/* Removes it; -1 with a TaasValueError (naming what is registered) when it is not. */
int taas_interp_unregister_loader(taas_interp *in, struct taas_value *loader, taas_error *err);
/* The registered loaders in registration order (borrowed references). */
size_t taas_interp_loader_count(const taas_interp *in);
struct taas_value *taas_interp_loader_at(const taas_interp *in, size_t i);
/* The session variable bound to exactly this value (first defined wins), for messages
 * such as "loader 'train'"; NULL when no variable holds it. */
const char *taas_interp_name_of(const taas_interp *in, const struct taas_value *v);

#endif
