/* A module with initial-exec TLS, loaded with dlopen by dlopen_tls. */
__thread int ie_var __attribute__((tls_model("initial-exec"))) = 1234;
__thread int ie_zero __attribute__((tls_model("initial-exec")));
int get_ie(void) { return ie_var + ie_zero; }
void set_ie(int v) { ie_var = v; }
