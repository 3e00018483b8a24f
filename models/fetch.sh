#!/usr/bin/env bash
# Puts a model into models/NAME/ (config.json, model.safetensors or shards, and tokenizer.model or tokenizer.json
# with tokenizer_config.json and generation_config.json when the repo has them) and points the symlink
# models/default at it.
#
# Usage: models/fetch.sh [NAME|OWNER/REPO] [--dtype f32|f16|bf16] [--file NAME.gguf] [--force]
#   stories260K (default)  from ../shared/models/ beside the project when present (no network), else downloaded
#                          from the Hugging Face hub (karpathy/tinyllamas) and converted with
#                          scripts/convert_llama2c.py. --dtype f16|bf16 gives models/stories260K-f16|-bf16.
#   OWNER/REPO             a Hugging Face repo id: config.json, the tokenizer (tokenizer.model, else
#                          tokenizer.json), tokenizer_config.json and generation_config.json when present, and
#                          model.safetensors (or model.safetensors.index.json and its shards) into models/REPO/,
#                          as published. A repo with neither tokenizer.model nor tokenizer.json is refused
#                          before any weights are downloaded.
#   OWNER/REPO --file F    one GGUF file of the repo (F may be in a folder of it: Q4_K_M/model.gguf) into
#                          models/REPO/, and models/default pointing at it; the first part of a split model
#                          (NAME-00001-of-0000N.gguf) brings every part.
#   --force                download again files that are already there.
# Environment: HF_TOKEN (gated repos), HF_ENDPOINT (default https://huggingface.co),
#              PLAINLLAMA_SHARED_DIR (default <project>/../shared).
set -euo pipefail

models_dir=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$models_dir")
shared=${PLAINLLAMA_SHARED_DIR:-$(cd "$root/.." && pwd)/shared}
endpoint=${HF_ENDPOINT:-https://huggingface.co}
endpoint=${endpoint%/}
host=${endpoint#*://}
host=${host%%/*}
python=/usr/bin/python3
[[ -x $python ]] || python=python3

die() { echo "fetch.sh: $*" >&2; exit 1; }
say() { echo "fetch.sh: $*" >&2; }

name=stories260K
dtype=""
gguf_file=""
force=0
positional=0
while (($#)); do
    case $1 in
        --dtype) (($# >= 2)) || die "--dtype needs a value (f32, f16 or bf16)"; dtype=$2; shift 2 ;;
        --dtype=*) dtype=${1#--dtype=}; shift ;;
        --file) (($# >= 2)) || die "--file needs a value (a .gguf file of the repo)"; gguf_file=$2; shift 2 ;;
        --file=*) gguf_file=${1#--file=}; shift ;;
        --force) force=1; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option '$1' (expected --dtype f32|f16|bf16, --file NAME.gguf, --force)" ;;
        *) ((positional == 0)) || die "unexpected argument '$1': give one model name or repo id"
           name=$1; positional=1; shift ;;
    esac
done
case $dtype in
    ""|f32|f16|bf16) ;;
    *) die "--dtype $dtype: expected f32, f16 or bf16" ;;
esac

# download URL FILE: to FILE via FILE.part; prints curl's or wget's error and returns non-zero on failure.
download() {
    local url=$1 out=$2 auth=()
    [[ -n ${HF_TOKEN:-} ]] && auth=(--header "Authorization: Bearer $HF_TOKEN")
    if command -v curl >/dev/null; then
        curl -fSL --connect-timeout 20 --retry 2 -sS "${auth[@]}" -o "$out.part" "$url" ||
            { rm -f "$out.part"; return 1; }
    elif command -v wget >/dev/null; then
        wget -q -T 20 -t 3 "${auth[@]}" -O "$out.part" "$url" || { rm -f "$out.part"; return 1; }
    else
        die "neither curl nor wget is installed"
    fi
    mv "$out.part" "$out"
}

# exists URL: 0 when the hub serves it, 1 on 404 (any other failure ends the script).
exists() {
    local url=$1 auth=() code
    [[ -n ${HF_TOKEN:-} ]] && auth=(--header "Authorization: Bearer $HF_TOKEN")
    if command -v curl >/dev/null; then
        code=$(curl -sSL -o /dev/null -w '%{http_code}' --connect-timeout 20 -r 0-0 "${auth[@]}" "$url") ||
            die "cannot reach $host: $url"
        case $code in
            2??) return 0 ;;
            404) return 1 ;;
            401|403) die "$url: HTTP $code (a gated or private repo: accept its licence and set HF_TOKEN)" ;;
            *) die "$url: HTTP $code" ;;
        esac
    else
        local rc=0
        wget -q --spider -T 20 -t 2 "${auth[@]}" "$url" || rc=$?
        case $rc in
            0) return 0 ;;
            8) return 1 ;;  # the server answered with an error (404 for a missing file)
            *) die "cannot reach $host: $url (wget exit $rc)" ;;
        esac
    fi
}

check_online() {
    local err
    if command -v curl >/dev/null; then
        err=$(curl -sS -o /dev/null --connect-timeout 20 -I "$endpoint" 2>&1) ||
            die "cannot reach $host: ${err#curl: }"
    elif command -v wget >/dev/null; then
        err=$(wget -q --spider -T 20 -t 1 "$endpoint" 2>&1) || die "cannot reach $host: wget failed ${err:+($err)}"
    else
        die "neither curl nor wget is installed"
    fi
}

# fetch_file REPO_URL_BASE FILE DEST_DIR: skip when present unless --force.
fetch_file() {
    local base=$1 file=$2 dest=$3
    if [[ -s $dest/$file && $force == 0 ]]; then
        say "$file already there"
        return 0
    fi
    mkdir -p "$(dirname "$dest/$file")"
    say "downloading $base/$file"
    download "$base/$file" "$dest/$file" || die "$base/$file: download failed"
}

copy_folder() {  # copy_folder SRC DEST: the files of SRC, writable in DEST
    local src=$1 dest=$2 f
    mkdir -p "$dest"
    for f in "$src"/*; do
        [[ -f $f ]] || continue
        rm -f "$dest/${f##*/}"
        cp "$f" "$dest/"
        chmod u+w "$dest/${f##*/}"
    done
}

fetch_stories260K() {
    local sfx="" dest
    [[ -n $dtype && $dtype != f32 ]] && sfx="-$dtype"
    dest_name=stories260K$sfx
    dest=$models_dir/$dest_name
    if [[ -f $shared/models/stories260K$sfx/model.safetensors ]]; then
        say "copying $shared/models/stories260K$sfx"
        copy_folder "$shared/models/stories260K$sfx" "$dest"
        return
    fi
    local ckpt tok src=$models_dir/stories260K-llama2c
    if [[ -f $shared/models/stories260K-llama2c/stories260K.bin && -f $shared/models/stories260K/tokenizer.model ]]
    then
        ckpt=$shared/models/stories260K-llama2c/stories260K.bin
        tok=$shared/models/stories260K/tokenizer.model
    else
        local base=$endpoint/karpathy/tinyllamas/resolve/main/stories260K
        if [[ $force == 1 || ! -s $src/stories260K.bin || ! -s $src/tok512.bin || ! -s $src/tok512.model ]]; then
            say "no $shared/models/stories260K$sfx; downloading from $base"
            check_online
            fetch_file "$base" stories260K.bin "$src"
            fetch_file "$base" tok512.bin "$src"
            # llama2.c's tok512.bin is not a SentencePiece model; tok512.model is the same vocabulary as one
            exists "$base/tok512.model" || die "$base/tok512.model: not found; plainllama needs a SentencePiece" \
                "tokenizer.model for the 512-piece vocabulary (pass one to scripts/convert_llama2c.py --tokenizer)"
            fetch_file "$base" tok512.model "$src"
        fi
        ckpt=$src/stories260K.bin
        tok=$src/tok512.model
    fi
    say "converting $ckpt"
    "$python" "$root/scripts/convert_llama2c.py" "$ckpt" "$dest" --dtype "${dtype:-f32}" --tokenizer "$tok"
}

fetch_hf_repo() {
    local repo=$1 dest base shards s
    [[ -z $dtype ]] || die "--dtype applies to stories260K only; $repo is fetched in its published dtype"
    [[ $repo =~ ^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$ ]] || die "'$repo': expected a model name or OWNER/REPO"
    # '.' or '..' as a part would write outside models/ (models/.. is the project root)
    [[ ${repo%%/*} != . && ${repo%%/*} != .. && ${repo#*/} != . && ${repo#*/} != .. ]] ||
        die "'$repo': '.' and '..' are not repo names"
    dest_name=${repo#*/}
    dest=$models_dir/$dest_name
    base=$endpoint/$repo/resolve/main
    check_online
    [[ -s $dest/config.json && $force == 0 ]] || exists "$base/config.json" ||
        die "$repo: no config.json on $host (is the repo id right?)"
    # The tokenizer first: a repo plainllama cannot tokenize for is refused before gigabytes of weights.
    local tokenizer
    if [[ -s $dest/tokenizer.model && $force == 0 ]] || exists "$base/tokenizer.model"; then
        tokenizer=tokenizer.model
    elif [[ -s $dest/tokenizer.json && $force == 0 ]] || exists "$base/tokenizer.json"; then
        tokenizer=tokenizer.json
    else
        die "$repo: neither tokenizer.model (SentencePiece) nor tokenizer.json (Hugging Face) on $host;" \
            "plainllama cannot run it (nothing downloaded)"
    fi
    mkdir -p "$dest"
    fetch_file "$base" config.json "$dest"
    fetch_file "$base" "$tokenizer" "$dest"
    for s in tokenizer_config.json generation_config.json; do  # chat template, BOS, end-of-turn ids
        if [[ -s $dest/$s && $force == 0 ]] || exists "$base/$s"; then fetch_file "$base" "$s" "$dest"; fi
    done
    if [[ -s $dest/model.safetensors.index.json && $force == 0 ]] || exists "$base/model.safetensors.index.json"
    then
        fetch_file "$base" model.safetensors.index.json "$dest"
        shards=$("$python" -c 'import json, sys
for s in sorted(set(json.load(open(sys.argv[1]))["weight_map"].values())): print(s)' \
                 "$dest/model.safetensors.index.json") || die "$dest/model.safetensors.index.json: no weight_map"
        [[ -n $shards ]] || die "$dest/model.safetensors.index.json: empty weight_map"
        while read -r s; do
            [[ $s =~ ^[A-Za-z0-9._-]+$ ]] || die "$dest/model.safetensors.index.json: bad shard name '$s'"
            fetch_file "$base" "$s" "$dest"
        done <<<"$shards"
    elif exists "$base/model.safetensors"; then
        fetch_file "$base" model.safetensors "$dest"
    else
        die "$repo: neither model.safetensors nor model.safetensors.index.json (only safetensors are supported)"
    fi
}

# fetch_gguf REPO FILE: FILE (and the other parts of a split model) into models/REPO/; models/default -> it.
fetch_gguf() {
    local repo=$1 file=$2 base dest parts k n stem
    [[ -z $dtype ]] || die "--dtype applies to stories260K only, not to a GGUF file"
    [[ $repo =~ ^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$ && ${repo%%/*} != . && ${repo%%/*} != .. && ${repo#*/} != . &&
       ${repo#*/} != .. ]] || die "'$repo': expected OWNER/REPO"
    # a path in the repo: plain names, no '.' or '..' part (it is also the path written under models/REPO/)
    [[ $file =~ ^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*\.gguf$ && ! $file =~ (^|/)\.\.?(/|$) ]] ||
        die "--file '$file': expected the path of a .gguf file in the repo (letters, digits, . _ - and /)"
    base=$endpoint/$repo/resolve/main
    dest=$models_dir/${repo#*/}
    parts=("$file")
    if [[ $file =~ ^(.*)-00001-of-([0-9]{5})\.gguf$ ]]; then
        stem=${BASH_REMATCH[1]}
        n=$((10#${BASH_REMATCH[2]}))
        parts=()
        for ((k = 1; k <= n; k++)); do parts+=("$(printf '%s-%05d-of-%05d.gguf' "$stem" "$k" "$n")"); done
    fi
    check_online
    for k in "${parts[@]}"; do
        [[ -s $dest/$k && $force == 0 ]] || exists "$base/$k" || die "$repo: no $k on $host (nothing downloaded)"
    done
    for k in "${parts[@]}"; do fetch_file "$base" "$k" "$dest"; done
    dest_name=${repo#*/}/$file
}

dest_name=""
case $name in
    stories260K) [[ -z $gguf_file ]] || die "--file takes OWNER/REPO (a Hugging Face repo)"; fetch_stories260K ;;
    */*) if [[ -n $gguf_file ]]; then fetch_gguf "$name" "$gguf_file"; else fetch_hf_repo "$name"; fi ;;
    *) die "unknown model '$name': expected stories260K or a Hugging Face repo id OWNER/REPO" ;;
esac

ln -sfn "$dest_name" "$models_dir/default"
say "models/$dest_name ready; models/default -> $dest_name"
