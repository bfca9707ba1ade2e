package arrival_test

import (
	"fmt"
	"time"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/arrival"
)

func Example() {
	s, err := arrival.New(config.Arrival{
		Process: config.ProcessConstant,
		Stages: []config.Stage{
			{Duration: time.Second, Rate: 2},
			{Duration: time.Second, Rate: 4},
		},
	}, 1)
	if err != nil {
		panic(err)
	}
	for {
		at, ok := s.Next()
		if !ok {
			break
		}
		fmt.Println(at)
	}
	// Output:
	// 500ms
	// 1s
	// 1.25s
	// 1.5s
	// 1.75s
	// 2s
}
