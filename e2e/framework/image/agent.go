package image

// NonrootUID is the user the Dockerfile's distroless nonroot base runs as (USER 65532:65532).
const NonrootUID = 65532

// CABundle is where the CA certificates are in the image, as on distroless and Debian.
const CABundle = "/etc/ssl/certs/ca-certificates.crt"

// Agent is the runtime layout that the Dockerfile produces for arch: the static agent binary at
// /nodeready on gcr.io/distroless/static-debian12:nonroot, which brings /etc/passwd and
// /etc/group with root, nobody and nonroot (65532), CA certificates, /tmp and /home/nonroot.
// TestAgentMatchesDockerfile holds the two together.
func Agent(arch string, binary, caCerts []byte) Spec {
	return Spec{
		OS:           "linux",
		Architecture: arch,
		Files: append(distrolessStatic(caCerts), File{
			Path: "/nodeready", Mode: 0o755, Data: binary,
		}),
		User:       "65532:65532",
		Entrypoint: []string{"/nodeready"},
		Env:        distrolessEnv(),
		WorkingDir: "/home/nonroot",
	}
}

// Binary is an image of one static program at /NAME, run as the nonroot user: the sandbox
// (pause) image and CoreDNS on the real node.
func Binary(arch, name string, binary []byte, user string) Spec {
	return Spec{
		OS:           "linux",
		Architecture: arch,
		Files:        append(distrolessStatic(nil), File{Path: "/" + name, Mode: 0o755, Data: binary}),
		User:         user,
		Entrypoint:   []string{"/" + name},
		Env:          distrolessEnv(),
	}
}

func distrolessEnv() []string {
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=" + CABundle}
}

// distrolessStatic is the part of distroless static that programs notice: users, groups, CA
// certificates (when given) and writable /tmp.
func distrolessStatic(caCerts []byte) []File {
	files := []File{
		{Path: "/etc", Mode: 0o755, Dir: true},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n")},
		{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")},
		{Path: "/home", Mode: 0o755, Dir: true},
		{Path: "/home/nonroot", Mode: 0o700, UID: NonrootUID, GID: NonrootUID, Dir: true},
		{Path: "/root", Mode: 0o700, Dir: true},
		{Path: "/tmp", Mode: 0o1777, Dir: true},
	}
	if caCerts != nil {
		files = append(files,
			File{Path: "/etc/ssl", Mode: 0o755, Dir: true},
			File{Path: "/etc/ssl/certs", Mode: 0o755, Dir: true},
			File{Path: CABundle, Mode: 0o644, Data: caCerts})
	}
	return files
}
