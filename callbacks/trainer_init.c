/* trainer_init and trainer_create: the trainer's constructors with
 * pytorch-accelerated's default callback list. They live with the built-in
 * callbacks because the default list is made of them; the trainer itself
 * (trainer_init_exact) takes the callbacks it is given. */
#include <stdlib.h>

#include "cb_internal.h"

/* The config's callbacks when it lists none and does not ask for none. */
static bool wants_default_list(const TrainerConfig *cfg)
{
    return cfg && !cfg->no_callbacks && cfg->n_callbacks == 0 && !cfg->callbacks;
}

CtStatus trainer_init(Trainer *t, const TrainerConfig *cfg)
{
    if (!wants_default_list(cfg)) return trainer_init_exact(t, cfg);
    Callback *cbs[CALLBACKS_DEFAULT_MAX];
    int n = callbacks_default(cbs, CALLBACKS_DEFAULT_MAX, true);
    if (n < 0) return ct_last_status(); /* callbacks_default recorded why */
    TrainerConfig with_defaults = *cfg;
    with_defaults.callbacks = cbs;
    with_defaults.n_callbacks = n;
    return trainer_init_exact(t, &with_defaults);
}

Trainer *trainer_create(const TrainerConfig *cfg)
{
    Trainer *t = malloc(sizeof *t);
    if (!t) {
        if (cfg && !wants_default_list(cfg))
            for (int i = 0; i < cfg->n_callbacks; i++) callback_free(cfg->callbacks[i]);
        ct_error(CT_ERR_OOM, "trainer_create: out of memory");
        return NULL;
    }
    if (trainer_init(t, cfg) != CT_OK) {
        free(t);
        return NULL;
    }
    return t;
}
