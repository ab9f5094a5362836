#!/bin/sh
# Records tests/reconstruct/java/Sample with the agent on a real JVM (the
# metadata is all that is needed) and loads the trace with recon_check.
# e2e.sh JAVA LIBJPT RECON_CHECK CLASSES_DIR
set -eu
java=$1 libjpt=$2 check=$3 classes=$4
out=$(mktemp -d "${TMPDIR:-/tmp}/recon-e2e.XXXXXX")
trap 'rm -rf "$out"' EXIT
"$java" -agentpath:"$libjpt"=out="$out/trace" -cp "$classes" Sample
"$check" "$out/trace" --sample
