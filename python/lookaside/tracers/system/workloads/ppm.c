/*
 * Images for the djpeg workload. `ppm gen W H` writes a W x H colour image (binary PPM) to
 * stdout: smooth gradients under a pattern of edges and texture, as in a photograph, so
 * that a JPEG codec does its usual work. `ppm cmp A B` checks that B is A after a lossy
 * round trip: the same header and a mean absolute difference per sample under 8 (5 at
 * quality 85; a broken codec gives tens; exit 1 otherwise), and prints that difference.
 * Usage: ppm gen W H > img.ppm | ppm cmp A.ppm B.ppm
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char *load(const char *path, int *w, int *h)
{
    FILE *f = fopen(path, "rb");
    int max;
    if (!f || fscanf(f, "P6 %d %d %d", w, h, &max) != 3 || max != 255 || fgetc(f) == EOF) {
        fprintf(stderr, "ppm: %s: not a binary PPM of 8-bit samples\n", path);
        exit(1);
    }
    size_t n = (size_t)*w * (size_t)*h * 3;
    unsigned char *p = malloc(n);
    if (!p || fread(p, 1, n, f) != n) {
        fprintf(stderr, "ppm: %s: short image\n", path);
        exit(1);
    }
    fclose(f);
    return p;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "gen") == 0) {
        int w = atoi(argv[2]), h = atoi(argv[3]);
        if (w < 1 || h < 1)
            return 2;
        printf("P6\n%d %d\n255\n", w, h);
        unsigned s = 12345;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                s = s * 1103515245u + 12345u;
                int noise = (int)((s >> 16) & 7) - 4;
                int disc = ((x - w / 3) * (x - w / 3) + (y - h / 2) * (y - h / 2)) < h * h / 9;
                int stripe = ((x + 2 * y) / 24) % 2;
                int r = x * 255 / w, g = y * 255 / h, b = 128 + (stripe ? 60 : -60);
                if (disc)
                    r = 230, g = 200 - y * 100 / h, b = 40;
                putchar(r + noise < 0 ? 0 : r + noise > 255 ? 255 : r + noise);
                putchar(g + noise < 0 ? 0 : g + noise > 255 ? 255 : g + noise);
                putchar(b + noise < 0 ? 0 : b + noise > 255 ? 255 : b + noise);
            }
        return ferror(stdout) ? 1 : 0;
    }
    if (argc == 4 && strcmp(argv[1], "cmp") == 0) {
        int w1, h1, w2, h2;
        unsigned char *a = load(argv[2], &w1, &h1), *b = load(argv[3], &w2, &h2);
        if (w1 != w2 || h1 != h2) {
            fprintf(stderr, "ppm: %dx%d against %dx%d\n", w1, h1, w2, h2);
            return 1;
        }
        size_t n = (size_t)w1 * (size_t)h1 * 3;
        double d = 0;
        for (size_t i = 0; i < n; i++)
            d += abs((int)a[i] - (int)b[i]);
        d /= (double)n;
        printf("ppm: %dx%d, mean difference %.2f\n", w1, h1, d);
        return d < 8 ? 0 : 1;
    }
    fprintf(stderr, "usage: ppm gen W H | ppm cmp A B\n");
    return 2;
}
