#include <stdio.h>
#ifndef SAMPLE_H
#define SAMPLE_H
#define BUFFER_SIZE 1024

struct point {
    int x;
    int y;
};

typedef struct {
    char *name;
} person_t;

enum color { RED, GREEN };

typedef int (*compare_fn)(const void *, const void *);

int add(int a, int b);

static int
add(int a, int b)
{
    return a + b;
}

char *copy_name(const char *name) {
    return NULL;
}

int main(void) {
    return add(1, 2);
}
#endif
