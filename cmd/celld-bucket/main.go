// Command celld-bucket serves a directory as an object store over HTTP, one subdirectory per
// bucket: the bucket the celld stand-in's bucket durability writes to (CELLD_BUCKET_ENDPOINT).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/celld/celld-operator/e2e/celldstore/bucketstore"
	"github.com/celld/celld-operator/internal/cli"
)

func main() { os.Exit(mainArgs(os.Args[1:], os.Stdout, os.Stderr)) }

func mainArgs(args []string, stdout, stderr io.Writer) int {
	return cli.Execute(newRoot(stdout, stderr), args, stderr)
}

func newRoot(out, errOut io.Writer) *cobra.Command {
	var dir, listen string
	root := &cobra.Command{
		Use:   "celld-bucket",
		Short: "Serve a directory as an object store, one subdirectory per bucket",
		Long: `celld-bucket stores objects as files under --dir/<bucket>/, each on disk (fsync'd) before
the PUT is answered:

  PUT /<bucket>/<object>     store it (If-None-Match: * only creates; 412 if it exists)
  GET /<bucket>/<object>     read it, 404 if absent
  GET /<bucket>?prefix=P     {"objects": [the names beginning with P]}
  GET /healthz`,
		Example: `  celld-bucket --dir /srv/buckets --listen :9000`,
		Args:    cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if dir == "" {
				return cli.Usagef("--dir is required")
			}
			if err := os.MkdirAll(dir, 0o750); err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "serving %s on %s\n", dir, ln.Addr())
			ctx, stop := signal.NotifyContext(c.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			srv := &http.Server{Handler: bucketstore.Handler(dir), ReadHeaderTimeout: 10 * time.Second}
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(sctx)
			}()
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	root.Flags().StringVar(&dir, "dir", "", "directory holding the buckets")
	root.Flags().StringVar(&listen, "listen", ":9000", "address to listen on")
	cli.Prepare(root, os.Stdin, out, errOut)
	return root
}
