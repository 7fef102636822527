module winpool.dev/hack/tools/winimage

go 1.26.0
