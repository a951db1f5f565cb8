/* main.c: placeholder; the daemon lands next. */
int main(void);
int main(void) { return 0; }
