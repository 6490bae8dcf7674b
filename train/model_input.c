/* The trainer's model, its input placement (model_impl.h): an absolute encoding's table P of the
 * batch's positions through the probe layer, and the gradient of its tensors from the table's. */
#include <stdlib.h>
#include <string.h>

#include "model_impl.h"

/* P[p - pmin] for every position of the batch, through the probe layer. */
pe_status tr_model_input_forward(tr_model *m, const int64_t *pos, int64_t N, pe_err *err) {
    int64_t pmin = pos[0], pmax = pos[0], C = m->cfg.C;
    for (int64_t i = 1; i < N; i++) pmin = pos[i] < pmin ? pos[i] : pmin, pmax = pos[i] > pmax ? pos[i] : pmax;
    if (!m->probe_params && m->pvalid && pmin >= m->pmin && pmax <= m->pmax) return PE_OK; /* fixed table */
    if (!m->probe_params) pmin = pmin < 0 ? pmin : 0; /* cache from 0 on */
    int64_t np = pmax - pmin + 1;
    if (np > m->pcap) {
        free(m->P), free(m->ppos);
        m->P = malloc(sizeof(float) * (size_t)(3 * np * C));
        m->ppos = malloc(sizeof(int64_t) * (size_t)np);
        m->pcap = m->P && m->ppos ? np : 0;
        if (!m->pcap) return pe_error(err, PE_ENOMEM, "out of memory for the position table");
        m->dP = m->P + np * C, m->px = m->dP + np * C;
    }
    for (int64_t i = 0; i < np; i++) m->ppos[i] = pmin + i;
    memset(m->px, 0, sizeof(float) * (size_t)(np * C));
    pe_status st = pe_attention_forward(m->probe, &m->probe_w, m->px, NULL, 0, m->ppos, 1, np, 1, m->P,
                                        NULL, NULL, err);
    m->pmin = pmin, m->pmax = pmax, m->pvalid = !st;
    return st;
}

pe_status tr_model_input_backward(tr_model *m, pe_err *err) {
    if (!m->probe || !m->probe_params) return PE_OK;
    const int64_t N = m->B * m->T, C = m->cfg.C, np = m->pmax - m->pmin + 1;
    const tr_acts *a = &m->a;
    /* forward was x0 += P[pos], so now: dP[pos] += dx, then through the probe layer */
    memset(m->dP, 0, sizeof(float) * (size_t)(np * C));
    for (int64_t i = 0; i < N; i++) {
        float *d = m->dP + (a->pos[i] - m->pmin) * C;
        for (int64_t c = 0; c < C; c++) d[c] += a->dx[i * C + c];
    }
    return pe_attention_backward(m->probe, &m->probe_w, m->dP, NULL, &m->probe_g, err);
}
