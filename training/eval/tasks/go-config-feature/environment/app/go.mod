module example.com/shipd

go 1.19
