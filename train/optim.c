/* AdamW, schedule, clipping (optim.h). */
#include "optim.h"

#include <math.h>
#include <stdlib.h>

int tr_adamw_init(tr_adamw *o, size_t n, double beta1, double beta2, double eps, double weight_decay) {
    *o = (tr_adamw){beta1, beta2, eps, weight_decay, NULL, NULL, n};
    o->m = calloc(2 * (n ? n : 1), sizeof(float));
    if (!o->m) return -1;
    o->v = o->m + n;
    return 0;
}

void tr_adamw_free(tr_adamw *o) {
    free(o->m);
    o->m = o->v = NULL;
}

void tr_adamw_update(tr_adamw *o, float *params, const float *grads, const tr_tensor *t, int nt,
                     double lr, int64_t step) {
    const float b1 = (float)o->beta1, b2 = (float)o->beta2, eps = (float)o->eps;
    const float c1 = (float)(1.0 / (1.0 - pow(o->beta1, (double)step)));
    const float c2 = (float)(1.0 / (1.0 - pow(o->beta2, (double)step)));
    for (int k = 0; k < nt; k++) {
        const float wd = t[k].decay ? (float)(lr * o->weight_decay) : 0.0f, a = (float)lr;
        float *p = params + t[k].off, *m = o->m + t[k].off, *v = o->v + t[k].off;
        const float *g = grads + t[k].off;
        for (int64_t i = 0; i < t[k].numel; i++) {
            m[i] = b1 * m[i] + (1.0f - b1) * g[i];
            v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
            p[i] -= a * (m[i] * c1) / (sqrtf(v[i] * c2) + eps) + wd * p[i];
        }
    }
}

double tr_lr_at(int64_t step, int64_t total, int64_t warmup, double lr, double min_frac) {
    if (step < warmup) return lr * (double)(step + 1) / (double)warmup;
    if (total <= warmup) return lr;
    double progress = (double)(step - warmup) / (double)(total - warmup);
    if (progress > 1) progress = 1;
    return lr * (min_frac + (1.0 - min_frac) * 0.5 * (1.0 + cos(3.14159265358979323846 * progress)));
}

double tr_clip_grads(float *grads, size_t n, double max_norm) {
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += (double)grads[i] * grads[i];
    double norm = sqrt(ss);
    if (max_norm > 0 && norm > max_norm) {
        float s = (float)(max_norm / (norm + 1e-6));
        for (size_t i = 0; i < n; i++) grads[i] *= s;
    }
    return norm;
}
