// Command warren runs the Warren AMQP 0-9-1 broker.
//
//	warren [-config broker.toml] [-listen ADDR]... [-admin ADDR] [-stream ADDR] [-data DIR]
//
// Without -config it uses the built-in defaults (AMQP on 127.0.0.1:5672,
// the admin API and web UI on 127.0.0.1:15672, vhost "/", guest/guest from
// loopback, data in ./data). Flags override the file: -listen, given once
// or more (an IPv4 and an IPv6 address, say), replaces amqp.listen; -admin
// replaces admin.listen and -stream stream.listen (the stream protocol's
// 5552), so Warren can start beside a RabbitMQ on other ports without a
// configuration file. SIGINT or SIGTERM shut the broker down cleanly, within
// limits.shutdown_timeout: clients are told 320 CONNECTION_FORCED. SIGHUP
// reloads the plugins' settings ([plugins.settings.NAME]) from the
// configuration file, if one was given; the rest of the file is read only
// at start, and Warren logs to stderr, so there is no log file to reopen.
// (Left to its default, SIGHUP would kill the broker when the terminal that
// started it goes away.)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/admin"
	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/storage"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "warren:", err)
		os.Exit(1)
	}
}

func run() error {
	configPath := flag.String("config", "", "broker.toml to read (default: built-in defaults)")
	var listen listenFlag
	flag.Var(&listen, "listen", "AMQP listen address, overriding amqp.listen; repeat it to listen on several")
	adminAddr := flag.String("admin", "", `admin API and web UI listen address, overriding admin.listen ("off" disables it)`)
	streamAddr := flag.String("stream", "", `stream protocol listen address, overriding stream.listen ("off" disables it)`)
	mqttAddr := flag.String("mqtt", "", `MQTT listen address, overriding mqtt.listen ("off" disables it)`)
	dataDir := flag.String("data", "", "data directory, overriding storage.data_dir")
	showVersion := flag.Bool("version", false, "print the version and exit")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile to this file until shutdown (for performance work)")
	flag.Parse()
	if *showVersion {
		fmt.Println("warren", broker.Version)
		return nil
	}

	cfg := config.Default()
	if *configPath != "" {
		var err error
		if cfg, err = config.Load(*configPath); err != nil {
			return err
		}
	}
	if len(listen) > 0 {
		cfg.AMQP.Listen = config.Addrs(listen)
	}
	switch *adminAddr {
	case "":
	case "off":
		cfg.Admin.Listen = ""
	default:
		cfg.Admin.Listen = *adminAddr
	}
	switch *streamAddr {
	case "":
	case "off":
		cfg.Stream.Listen = nil
	default:
		cfg.Stream.Listen = config.Addrs{*streamAddr}
	}
	switch *mqttAddr {
	case "":
	case "off":
		cfg.MQTT.Listen = nil
	default:
		cfg.MQTT.Listen = config.Addrs{*mqttAddr}
	}
	if *dataDir != "" {
		cfg.Storage.DataDir = *dataDir
	}
	log, err := newLogger(cfg.Log)
	if err != nil {
		return err
	}
	// Signals are caught from here on: one arriving while the broker starts
	// (a long recovery, say) is acted on once it has, never left to the
	// default action, which for SIGHUP is to die.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	b, err := newBrokerWhenDiskAllows(cfg, log, sigs)
	if err != nil || b == nil {
		return err
	}
	if err := b.Start(); err != nil {
		return err
	}
	if err := b.ServeAdmin(admin.Handler(b)); err != nil {
		_ = b.Shutdown(context.Background())
		return err
	}
	log.Info().Str("version", broker.Version).Msg("Warren started")

	sig := <-sigs
	for sig == syscall.SIGHUP {
		reload(b, *configPath, log)
		sig = <-sigs
	}
	log.Info().Str("signal", sig.String()).Msg("shutting down")
	// Shutdown bounds itself by limits.shutdown_timeout.
	if err := b.Shutdown(context.Background()); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// reload reads the configuration file again for what can change in a
// running broker: the plugins' settings. A file that does not load changes
// nothing.
func reload(b *broker.Broker, path string, log zerolog.Logger) {
	if path == "" {
		log.Info().Msg("SIGHUP: no configuration file to reload")
		return
	}
	cfg, err := config.Load(path)
	if err != nil {
		log.Error().Err(err).Msg("SIGHUP: the configuration file did not load; nothing changed")
		return
	}
	if err := b.ReloadPluginSettings(cfg.Plugins.Settings); err != nil {
		log.Error().Err(err).Msg("SIGHUP: plugin settings not all reloaded")
		return
	}
	log.Info().Str("config", path).Msg("SIGHUP: plugin settings reloaded")
}

// listenFlag collects every -listen.
type listenFlag []string

func (l *listenFlag) String() string { return fmt.Sprint(*l) }

func (l *listenFlag) Set(addr string) error {
	*l = append(*l, addr)
	return nil
}

// startSpaceRecheck is how often a start-up held by a full disk looks again.
const startSpaceRecheck = 5 * time.Second

// newBrokerWhenDiskAllows builds the broker. When the data directory's disk
// is too full to open the store, it logs that once and tries again every
// startSpaceRecheck until there is space, rather than exiting (a service
// manager would restart it into the same state) or letting the store spin on
// failed writes. A signal meanwhile ends it cleanly: nil broker, nil error.
func newBrokerWhenDiskAllows(cfg config.Config, log zerolog.Logger, sigs <-chan os.Signal) (*broker.Broker, error) {
	waited := false
	for {
		b, err := broker.New(cfg, log)
		if !errors.Is(err, storage.ErrNoSpace) {
			if err == nil && waited {
				log.Info().Msg("enough disk space now: starting")
			}
			return b, err
		}
		if !waited {
			log.Error().Err(err).Dur("recheck", startSpaceRecheck).Msg("not enough disk space to start: waiting for space")
			waited = true
		}
		select {
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				log.Info().Str("signal", sig.String()).Msg("ignored: nothing to reload or reopen")
				continue
			}
			log.Info().Str("signal", sig.String()).Msg("stopped while waiting for disk space")
			return nil, nil
		case <-time.After(startSpaceRecheck):
		}
	}
}

// newLogger writes readable lines to a terminal and JSON otherwise.
func newLogger(c config.Log) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(c.Level)
	if err != nil {
		return zerolog.Logger{}, fmt.Errorf("log.level: %w", err)
	}
	console := c.Format == "console" || (c.Format == "auto" && isatty.IsTerminal(os.Stderr.Fd()))
	var log zerolog.Logger
	if console {
		log = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.RFC3339})
	} else {
		log = zerolog.New(os.Stderr)
	}
	return log.Level(level).With().Timestamp().Logger(), nil
}
