// Command shipper stands in for a member's sidecar (a log shipper, a CA bundle refresher): it
// copies the file SHIPPER_FROM to SHIPPER_TO every half second, through a temporary file so that
// a reader never sees half of it, until SIGTERM. The real-node tests run it beside celld to show
// that a sidecar starts, shares a volume with celld and reads the user's extra volumes.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	from, to := os.Getenv("SHIPPER_FROM"), os.Getenv("SHIPPER_TO")
	if from == "" || to == "" {
		fmt.Fprintln(os.Stderr, "shipper: set SHIPPER_FROM and SHIPPER_TO")
		os.Exit(2)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := ship(from, to); err != nil {
			fmt.Fprintln(os.Stderr, "shipper:", err)
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

func ship(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(to), ".ship-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), to)
}
