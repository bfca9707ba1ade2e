package arrival

import (
	"math"
	"math/rand/v2"
)

// gammaSampler draws Gamma(shape=b, scale=1/b) variates: mean 1, coefficient
// of variation 1/sqrt(b). math/rand/v2 has no gamma generator, so this is
// Marsaglia and Tsang's method ("A simple method for generating gamma
// variables", ACM TOMS 26(3), 2000), with their boost for b < 1:
// Gamma(b) = Gamma(b+1)·U^(1/b).
type gammaSampler struct {
	shape float64 // b
	boost bool    // b < 1
	d, c  float64 // Marsaglia–Tsang constants for shape max(b, b+1)
}

func newGammaSampler(shape float64) gammaSampler {
	a := shape
	boost := a < 1
	if boost {
		a++
	}
	d := a - 1.0/3
	return gammaSampler{shape: shape, boost: boost, d: d, c: 1 / math.Sqrt(9*d)}
}

// sample returns one Gamma(b, 1/b) variate. Very small b can return 0 (the
// density is infinite at 0 and U^(1/b) underflows); that is a valid gap: two
// arrivals due at the same instant, which the ceiling then spaces.
func (g *gammaSampler) sample(rng *rand.Rand) float64 {
	var y float64
	for {
		x := rng.NormFloat64()
		v := 1 + g.c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := 1 - rng.Float64() // (0, 1], so that log(u) is finite
		x2 := x * x
		if u < 1-0.0331*x2*x2 || math.Log(u) < 0.5*x2+g.d*(1-v+math.Log(v)) {
			y = g.d * v
			break
		}
	}
	if g.boost {
		y *= math.Pow(1-rng.Float64(), 1/g.shape)
	}
	return y / g.shape
}
