# needs: pkg:libjpeg-turbo-progs
# An image decoder, for the jpeg_play and mpeg_play of Chen and Bershad's and of Nagle and
# Uhlig's measurements (a user-bound decoder with a large working set): libjpeg-turbo's cjpeg
# encodes a generated 384x288 photograph-like image (ppm.c), djpeg decodes it twice (whole,
# and scaled to half with the other IDCT), and the decoded image is checked against the
# original.
ppm gen 384 288 > img.ppm || exit 1
/usr/bin/cjpeg -quality 85 img.ppm > img.jpg || exit 1
/usr/bin/djpeg -ppm img.jpg > out.ppm || exit 1
/usr/bin/djpeg -ppm -scale 1/2 -dct float img.jpg > half.ppm || exit 1
[ "$(head -n 2 half.ppm | tail -n 1)" = "192 144" ] || exit 1
ppm cmp img.ppm out.ppm && echo "djpeg: $(wc -c < img.ppm) bytes -> $(wc -c < img.jpg)"
