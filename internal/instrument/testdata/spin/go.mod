module example.com/spin

go 1.26.0

require github.com/retrybudget/retrybudget v0.0.0

replace github.com/retrybudget/retrybudget => ../../../..
